"""JSON in and out of the files pytest-gpuperf keeps: bounded, strict reading and finite writing.

Reading (``read_json``) turns every way a file can be hostile or simply wrong into one
``GpuPerfError`` subclass naming the file: too large (also after gzip decompression, which is
streamed and stopped at ``MAX_JSON_BYTES``), binary or not UTF-8, invalid JSON, nested past
Python's recursion limit, holding an integer too long to convert, or naming one key twice in
an object (a JSON parser keeps the last value silently, so such a file does not say what it shows).

Writing (``finite_payload``) replaces NaN and infinities, which JSON has no token for, by null
and returns a note naming each field, so a written file always parses with strict readers.
"""

from __future__ import annotations

import gzip
import json
import math
import reprlib
import zlib
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import GpuPerfError

# The largest JSON text read, after decompression. The biggest report the project keeps is a
# few MiB inflated; a gzip bomb stops here instead of taking the machine's memory.
MAX_JSON_BYTES = 256 * 1024 * 1024
GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1024 * 1024

_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60
_short.maxlong = 40
_short.maxlist = 4
_short.maxdict = 4
_short.maxlevel = 2


def shown(value: Any) -> str:
    """``repr(value)``, shortened so that one hostile value cannot flood an error line."""
    return _short.repr(value)


def read_bytes(path: Path, kind: str, error: type[GpuPerfError], *, limit: int | None = None) -> bytes:
    """The content of ``path``, gunzipped when it starts with the gzip magic, at most ``limit``
    bytes (default ``MAX_JSON_BYTES``, read at call time so it can be changed).

    ``FileNotFoundError`` passes through (callers say what a missing file means); every other
    problem raises ``error`` with one line naming the file.
    """
    limit = MAX_JSON_BYTES if limit is None else limit
    try:
        with open(path, "rb") as fh:
            packed = fh.read(2) == GZIP_MAGIC
            fh.seek(0)
            data = _read_capped(gzip.GzipFile(fileobj=fh, mode="rb") if packed else fh, limit)
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise error(f"{kind} {path} is a folder, not a file") from None
    except _TooLarge:
        raise error(
            f"{kind} {path} is larger than {limit // (1024 * 1024)} MiB{' decompressed' if packed else ''}; "
            "it is not a file pytest-gpuperf wrote (raise pytest_gpuperf.store.jsonio.MAX_JSON_BYTES to read it anyway)"
        ) from None
    except (OSError, EOFError, zlib.error) as exc:  # damaged gzip data is zlib.error or EOFError
        raise error(f"{kind} {path} cannot be read: {exc}") from None
    return data


class _TooLarge(Exception):
    pass


def _read_capped(stream: Any, limit: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            return b"".join(parts)
        total += len(chunk)
        if total > limit:
            raise _TooLarge
        parts.append(chunk)


def decode_text(data: bytes, path: Path, kind: str, error: type[GpuPerfError]) -> str:
    """``data`` as UTF-8 text; binary content is an error naming the file."""
    if b"\x00" in data[:8192]:
        raise error(f"{kind} {path} is binary (it holds NUL bytes), not a JSON text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{kind} {path} is not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); "
            "it is binary or in another encoding, not a JSON file pytest-gpuperf wrote"
        ) from None


def parse_text(text: str, path: Path, kind: str, error: type[GpuPerfError], *, hint: str = "") -> Any:
    """``text`` parsed as JSON; every parser failure, and a key given twice in one object, is one
    line naming the file (and the repeated field)."""
    repeated: list[_Repeated] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) == len(items):
            return obj
        found = _Repeated(items)
        repeated.append(found)
        return found

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise error(
            f"{kind} {path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}){hint}"
        ) from None
    except RecursionError:
        raise error(
            f"{kind} {path} nests arrays or objects too deeply to read; it is not a file pytest-gpuperf wrote"
        ) from None
    except ValueError as exc:  # an integer literal past sys.get_int_max_str_digits()
        raise error(f"{kind} {path} holds a number too long to read ({exc}){hint}") from None
    if repeated:
        where, times = _first_repeated(data) or (repeated[0].key, repeated[0].times)
        raise error(
            f"{kind} {path}: field {where!r} appears {times} times in one object, and a JSON reader silently keeps "
            f"only the last; keep the one that is right{hint or '.'}"
        )
    return data


class _Repeated(dict[str, Any]):
    """A parsed JSON object that names a key more than once: ``key`` (the first such) and how
    many times it appears."""

    def __init__(self, items: list[tuple[str, Any]]):
        super().__init__(items)
        names = [name for name, _ in items]
        self.key = next(name for i, name in enumerate(names) if name in names[:i])
        self.times = names.count(self.key)


def _first_repeated(data: Any) -> tuple[str, int] | None:
    """The field (``entries.test_a::k``, ``tests[0].nodeid``) of the first repeated key in
    document order, and how many times it appears. Iterative: the document may nest as deeply
    as the parser allowed."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        at, value = stack.pop()
        if isinstance(value, _Repeated):
            return (f"{at}.{value.key}" if at else value.key), value.times
        if isinstance(value, dict):
            stack.extend((f"{at}.{k}" if at else str(k), v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((f"{at}[{i}]", v) for i, v in reversed(list(enumerate(value))))
    return None  # not reached: an object holding a dropped value repeats a key and is in the document


def read_json(path: Path, kind: str, error: type[GpuPerfError], *, hint: str = "", limit: int | None = None) -> Any:
    """The JSON value stored at ``path`` (gzipped or not); see the module doc for the errors."""
    return parse_text(
        decode_text(read_bytes(path, kind, error, limit=limit), path, kind, error), path, kind, error, hint=hint
    )


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type: object, array, string, number, boolean or null."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def finite_number(value: Any) -> float | None:
    """``value`` as a finite float, or None when it is not a number (bools neither) or not finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond the float range
        return None
    return number if math.isfinite(number) else None


def finite_payload(payload: Any, where: str = "") -> tuple[Any, list[str]]:
    """A copy of ``payload`` with every non-finite float replaced by None, and a note per field.

    The notes name the field as the readers' errors do (``tests[0].figures[1].value``).
    """
    notes: list[str] = []

    def clean(value: Any, at: str) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            notes.append(f"{at or '<top level>'}: {value!r} is not a JSON number; written as null")
            return None
        if isinstance(value, dict):
            return {k: clean(v, f"{at}.{k}" if at else str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v, f"{at}[{i}]") for i, v in enumerate(value)]
        return value

    return clean(payload, where), notes
