"""JSON in and out of the files pytest-gpuperf keeps: bounded, strict reading and finite writing.

Reading (``read_json``) turns every way a file can be hostile or simply wrong into one
``GpuPerfError`` subclass naming the file: not a regular file (a FIFO, socket or device is
refused before it is opened for reading, so it cannot hang the reader), too large (also after
gzip decompression, which is streamed and stopped at ``MAX_JSON_BYTES``), holding more items
than ``MAX_JSON_ITEMS`` (counted before parsing, so a small file of millions of tiny values
cannot take the machine's memory), binary or not UTF-8, invalid JSON, nested deeper than
``MAX_JSON_DEPTH``, holding a string longer than ``MAX_JSON_STRING_CHARS`` or an integer too
long to convert, or naming one key twice in an object (a JSON parser keeps the last value
silently, so such a file does not say what it shows). Every cap is read at call time, so a
caller may raise it.

Writing (``finite_payload``) replaces NaN and infinities, which JSON has no token for, by null
and returns a note naming each field, so a written file always parses with strict readers.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import reprlib
import stat
import zlib
from pathlib import Path
from typing import Any, BinaryIO

from pytest_gpuperf.errors import GpuPerfError

# The caps on what is read. The biggest report the project keeps (a whole-suite run, 275
# measurements) is 2.6 MB inflated, 70,000 items, 10 levels deep, its longest string 291
# characters; each cap leaves room for a suite 25 times as large. Parsing a file at every cap
# at once takes a few hundred MB of memory, where an uncapped 255 KB gzip took gigabytes.
MAX_JSON_BYTES = 64 * 1024 * 1024  # the JSON text, after decompression
MAX_JSON_ITEMS = 2_000_000  # array elements and object fields, all levels together
MAX_JSON_DEPTH = 64  # arrays and objects inside each other
MAX_JSON_STRING_CHARS = 1024 * 1024  # one string (or object key)
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
    packed = False
    try:
        with open_regular(path, kind, error) as fh:
            packed = fh.read(2) == GZIP_MAGIC
            fh.seek(0)
            data = read_capped(gzip.GzipFile(fileobj=fh, mode="rb") if packed else fh, limit)
    except FileNotFoundError:
        raise
    except TooLarge:
        raise error(
            f"{kind} {path} is larger than {limit // (1024 * 1024)} MiB{' decompressed' if packed else ''}; "
            "it is not a file pytest-gpuperf wrote (raise pytest_gpuperf._store.jsonio.MAX_JSON_BYTES to read it anyway)"
        ) from None
    except (OSError, EOFError, zlib.error) as exc:  # damaged gzip data is zlib.error or EOFError
        raise error(f"{kind} {path} cannot be read: {exc}") from None
    return data


def open_regular(path: Path, kind: str, error: type[GpuPerfError]) -> BinaryIO:
    """``path`` opened for binary reading when it is a regular file (or a link to one).

    A named pipe, socket or device is refused from its ``stat`` alone, before it is opened (a
    FIFO's reader would wait for a writer forever); the open itself does not wait either
    (``O_NONBLOCK``), and what it opened is checked again, in case the name changed in between.
    ``FileNotFoundError`` passes through; every other problem raises ``error`` naming the file.
    """
    try:
        _require_regular(os.stat(path).st_mode, path, kind, error)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise error(f"{kind} {path} cannot be read: {exc.strerror or exc}") from None
    try:
        _require_regular(os.fstat(fd).st_mode, path, kind, error)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _require_regular(mode: int, path: Path, kind: str, error: type[GpuPerfError]) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise error(f"{kind} {path} is a folder, not a file")
    what = next((name for test, name in _SPECIAL if test(mode)), "not a regular file")
    raise error(
        f"{kind} {path} is {what}, not a regular file, so it was not read (reading it could wait forever); "
        "remove it, or replace it with the file itself"
    )


_SPECIAL = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class TooLarge(Exception):
    """A stream held more than the limit it was read with."""


def read_capped(stream: Any, limit: int) -> bytes:
    """All of ``stream`` (read in chunks), or ``TooLarge`` as soon as it passes ``limit`` bytes."""
    parts: list[bytes] = []
    total = 0
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            return b"".join(parts)
        total += len(chunk)
        if total > limit:
            raise TooLarge
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
    """``text`` parsed as JSON within the caps (see the module doc); every failure, and a key given
    twice in one object, is one line naming the file (and the repeated field)."""
    # Counted before parsing: every array element and object field past a container's first
    # follows a comma, so this bounds what json.loads would build (commas inside strings only
    # make it larger).
    items = text.count(",") + text.count("[") + text.count("{")
    if items > MAX_JSON_ITEMS:
        raise error(
            f"{kind} {path} holds more than {MAX_JSON_ITEMS:,} array elements and object fields, so it was not "
            "parsed (a report would need millions of samples to be that large); "
            "raise pytest_gpuperf._store.jsonio.MAX_JSON_ITEMS to read it anyway"
        )
    repeated: list[_Repeated] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) == len(items):
            return obj
        found = _Repeated(items)
        repeated.append(found)
        return found

    try:
        value = json.loads(text, object_pairs_hook=pairs)
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
    problem = _shape_problem(value)
    if problem:
        raise error(f"{kind} {path} {problem}; it is not a file pytest-gpuperf wrote")
    if repeated:
        where, times = _first_repeated(value) or (repeated[0].key, repeated[0].times)
        raise error(
            f"{kind} {path}: field {where!r} appears {times} times in one object, and a JSON reader silently keeps "
            f"only the last; keep the one that is right{hint or '.'}"
        )
    return value


def _shape_problem(value: Any) -> str | None:
    """What puts a parsed value past ``MAX_JSON_DEPTH`` or ``MAX_JSON_STRING_CHARS``, or None."""
    depth_cap, chars_cap = MAX_JSON_DEPTH, MAX_JSON_STRING_CHARS
    too_deep = f"nests arrays or objects too deeply to read (deeper than {depth_cap})"
    if isinstance(value, str):
        value = [value]
    stack: list[tuple[Any, int]] = [(value, 0)] if isinstance(value, (dict, list)) else []
    while stack:
        container, depth = stack.pop()
        if depth >= depth_cap:
            return too_deep
        children = container
        if isinstance(container, dict):
            children = container.values()
            for key in container:
                if len(key) > chars_cap:
                    return _long(len(key), chars_cap)
        for child in children:  # scalars are checked here rather than stacked: most items are numbers
            kind = type(child)
            if kind is str:
                if len(child) > chars_cap:
                    return _long(len(child), chars_cap)
            elif kind is list or kind is dict:
                stack.append((child, depth + 1))
    return None


def _long(chars: int, cap: int) -> str:
    return f"holds a string of {chars:,} characters, longer than the {cap:,} read"


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
