"""Finding the binary that defines a kernel, by the name the driver gives it (``cuFuncGetName``: the
mangled name of a C++ kernel, the plain name of an ``extern "C"`` or Triton kernel).

Places are searched in the order of :data:`LOCATIONS`; the first place holding a match wins, and in
each place the newest file comes first. A file matches when the name, NUL-terminated on both sides
as symbol and string tables store it, occurs in its bytes, and ``cuobjdump -res-usage -fun NAME``
then lists the function (a library that only mentions the name does not match). At most
``max_files`` files are read, each up to ``max_bytes``.

Nothing is read from a folder that every user can write, nor from below a folder that every user
can write and that lacks the sticky bit: a kernel found there could be anyone's. Such folders are
skipped and named in the result, like files over the size limit; symbolic links met while walking
a folder are not followed.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import mmap
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pytest_gpuperf._compile.cuda_module import ToolchainMissing
from pytest_gpuperf._diagnose.device_code import Binary, UnreadableBinary, cuobjdump, tool_input
from pytest_gpuperf._store.private_dir import default_cache_root, replaceable_from
from pytest_gpuperf.errors import UnsafePathError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_FILES",
    "LOCATIONS",
    "BinarySearch",
    "find_binary",
]

# (found_in, where), in search order.
LOCATIONS: tuple[tuple[str, str], ...] = (
    (
        "registered path",
        "the paths passed as extra: files, folders (searched for *.cubin, *.fatbin, *.so, *.o) or globs",
    ),
    ("nvcc cache", "the plugin's nvcc libraries: <cache root>/nvcc/entries/*/, with each build's nvcc.log"),
    ("static cache", "the compile-time tier's cubins: <cache root>/static/entries/*/module.cubin, with ptxas.log"),
    ("cupy cache", "CuPy's kernel cache (NVRTC and nvcc modules): $CUPY_CACHE_DIR or ~/.cupy/kernel_cache, *.cubin"),
    ("triton cache", "Triton's cache: $TRITON_CACHE_DIR or $TRITON_HOME/.triton/cache (~/.triton/cache), */*.cubin"),
    (
        "torch extensions",
        "PyTorch C++/CUDA extensions: $TORCH_EXTENSIONS_DIR or $XDG_CACHE_HOME/torch_extensions "
        "(~/.cache/torch_extensions), **/*.so",
    ),
)
DEFAULT_MAX_FILES = 2000
DEFAULT_MAX_BYTES = 1 << 30
_FOLDER_SUFFIXES = (".cubin", ".fatbin", ".so", ".o")
_CUPY_DIGEST_MIN = 32  # hex digits of the digest CuPy writes in front of a cached module
_CUPY_NAMES_MARK = b"\x93CUPYNE"  # CuPy's table of name_expressions, between the digest and the cubin
_CUPY_HEAD_BYTES = 1 << 20
_ELF_MAGIC = b"\x7fELF"
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")


@dataclasses.dataclass(frozen=True)
class BinarySearch:
    """Where :func:`find_binary` found a kernel, or why it did not."""

    kernel: str
    binary: Binary | None
    searched: tuple[str, ...]  # "nvcc cache: 16 files in /home/u/.cache/pytest-gpuperf/nvcc/entries"
    skipped: tuple[str, ...]  # folders and files left unread, each with its reason
    files_read: int
    confirmed: bool = False  # cuobjdump listed the function (False where cuobjdump is missing)

    @property
    def reason(self) -> str | None:
        """Why nothing was found (None when something was)."""
        if self.binary is not None:
            return None
        where = "; ".join(self.searched) or "nowhere (no location exists)"
        skipped = f"; skipped {len(self.skipped)}: " + "; ".join(self.skipped[:3]) if self.skipped else ""
        return f"no binary defines {self.kernel} (searched {where}){skipped}"

    def render_lines(self, limit: int = 3) -> list[str]:
        """At most ``limit`` lines for a terminal: where the binary is, or what was searched."""
        if self.binary is not None:
            how = "" if self.confirmed else " (name found in its bytes; cuobjdump could not confirm it)"
            lines = [f"{self.kernel}: {self.binary.found_in}, {self.binary.path}{how}"]
        else:
            lines = [self.reason or ""]
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)}: " + "; ".join(self.skipped))
        return [_clip(line) for line in lines[: max(limit, 1)]]

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "binary": self.binary.to_json() if self.binary is not None else None,
            "searched": list(self.searched),
            "skipped": list(self.skipped),
            "files_read": self.files_read,
            "confirmed": self.confirmed,
        }

    @classmethod
    def from_json(cls, data: Any) -> BinarySearch:
        if not isinstance(data, dict) or not isinstance(data.get("kernel"), str):
            raise ValueError(f"a binary search: expected an object with a kernel, got {data!r}")
        binary = data.get("binary")
        return cls(
            kernel=data["kernel"],
            binary=Binary.from_json(binary) if binary is not None else None,
            searched=tuple(str(s) for s in data.get("searched", ())),
            skipped=tuple(str(s) for s in data.get("skipped", ())),
            files_read=int(data.get("files_read", 0)),
            confirmed=bool(data.get("confirmed", False)),
        )


def _clip(line: str, width: int = 240) -> str:
    return line if len(line) <= width else line[: width - 3] + "..."


def _lists_function(binary: Binary, kernel: str) -> bool:
    with tool_input(binary) as path:
        text = cuobjdump(path, "-res-usage", "-fun", kernel)
    return any(line.strip() == f"Function {kernel}:" for line in text.splitlines())


# --------------------------------------------------------------------------------------------
# Where to look


def _unsafe_folder(folder: Path) -> str | None:
    """Why nothing below ``folder`` may be read, or None: it, or a folder above it without the
    sticky bit, can be written by every user."""
    try:
        st = os.stat(folder)
    except OSError as exc:
        return f"{folder}: {exc.strerror or exc}"
    if st.st_mode & stat.S_IWOTH:
        return f"{folder} is writable by every user"
    parent = replaceable_from(folder)
    if parent is not None:
        return f"{folder} lies inside {parent}, which every user can write and which lacks the sticky bit"
    return None


@dataclasses.dataclass
class _Walk:
    """The state of one search: files read, what was skipped, the caps."""

    max_files: int
    max_bytes: int
    files_read: int = 0
    skipped: list[str] = dataclasses.field(default_factory=list)

    def skip(self, what: str) -> None:
        if what not in self.skipped:
            self.skipped.append(what)


def _files_below(root: Path, walk: _Walk, suffixes: tuple[str, ...], depth: int | None) -> list[Path]:
    """Regular files under ``root`` ending in ``suffixes``, at most ``depth`` folders down (None:
    any), never through a symbolic link or into a folder every user can write."""
    found: list[Path] = []
    pending: list[tuple[Path, int]] = [(root, 0)]
    while pending:
        folder, level = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            walk.skip(f"{folder}: {exc.strerror or exc}")
            continue
        for entry in entries:
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir():
                    if depth is not None and level >= depth:
                        continue
                    if entry.stat().st_mode & stat.S_IWOTH:
                        walk.skip(f"{entry.path} is writable by every user")
                        continue
                    pending.append((Path(entry.path), level + 1))
                elif entry.is_file() and entry.name.endswith(suffixes):
                    found.append(Path(entry.path))
            except OSError:
                continue
    return found


def _newest_first(paths: Sequence[Path]) -> list[Path]:
    def mtime(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    return sorted(dict.fromkeys(paths), key=mtime, reverse=True)


def _registered(extra: Sequence[str | os.PathLike[str]], walk: _Walk) -> list[Path]:
    files: list[Path] = []
    for item in extra:
        text = os.path.expanduser(os.fspath(item))
        matches = sorted(glob.glob(text, recursive=True)) if glob.has_magic(text) else [text]
        for match in matches:
            path = Path(match)
            if path.is_dir():
                reason = _unsafe_folder(path)
                if reason:
                    walk.skip(reason)
                else:
                    files += _files_below(path, walk, _FOLDER_SUFFIXES, None)
            elif path.is_file():
                real = Path(os.path.realpath(path))
                reason = _unsafe_folder(real.parent)
                if reason:
                    walk.skip(reason)
                else:
                    files.append(real)
            elif not glob.has_magic(text):
                walk.skip(f"{path}: no such file or folder")
    return _newest_first(files)


def _plugin_entries(cache: str, walk: _Walk, source_root: Path | None) -> tuple[Path | None, list[Binary]]:
    """The binaries of the plugin's ``nvcc`` or ``static`` build cache, newest first, each with its
    build log; with ``source_root``, only builds whose command names a path under it."""
    try:
        root = default_cache_root() / cache / "entries"
    except UnsafePathError as exc:
        walk.skip(str(exc))
        return None, []
    if not root.is_dir():
        return root, []
    reason = _unsafe_folder(root)
    if reason:
        walk.skip(reason)
        return root, []
    found: list[Binary] = []
    for entry in _newest_first([p for p in root.iterdir() if p.is_dir() and not p.is_symlink()]):
        try:
            meta = json.loads((entry / "build.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a build in progress or a damaged entry, which the cache rebuilds
        files = meta.get("files") if isinstance(meta, dict) else None
        info = meta.get("meta") if isinstance(meta, dict) else None
        if not isinstance(files, dict) or not isinstance(info, dict):
            continue
        if source_root is not None and not _names_path_under(info.get("command"), source_root):
            continue
        if cache == "nvcc":
            binary, log = info.get("library"), "nvcc.log"
        else:
            binary, log = "module.cubin", "ptxas.log"
        if not isinstance(binary, str) or binary not in files or "/" in binary:
            continue
        found.append(Binary(entry / binary, f"{cache} cache", log=entry / log if log in files else None))
    return root, found


def _names_path_under(command: Any, root: Path) -> bool:
    if not isinstance(command, list):
        return False
    top = os.path.realpath(root) + os.sep
    for argument in command:
        if not isinstance(argument, str):
            continue
        path = argument[2:] if argument.startswith(("-I", "-L")) else argument
        if os.path.isabs(path) and (os.path.realpath(path) + os.sep).startswith(top):
            return True
    return False


def _home() -> Path | None:
    try:
        return Path.home()
    except RuntimeError:
        return None


def _env_folder(variable: str, *default: str, base: Path | None) -> Path | None:
    value = os.environ.get(variable)
    if value:
        return Path(value).expanduser()
    return base.joinpath(*default) if base is not None else None


def _outside_roots() -> list[tuple[str, Path | None, tuple[str, ...], int | None]]:
    """(found_in, root, suffixes, depth) of CuPy's, Triton's and torch extensions' caches."""
    home = _home()
    triton_home = Path(os.environ["TRITON_HOME"]) if os.environ.get("TRITON_HOME") else home
    xdg = os.environ.get("XDG_CACHE_HOME")
    cache_home = Path(xdg) if xdg and os.path.isabs(xdg) else (home / ".cache" if home is not None else None)
    return [
        ("cupy cache", _env_folder("CUPY_CACHE_DIR", ".cupy", "kernel_cache", base=home), (".cubin",), 0),
        ("triton cache", _env_folder("TRITON_CACHE_DIR", ".triton", "cache", base=triton_home), (".cubin",), 1),
        ("torch extensions", _env_folder("TORCH_EXTENSIONS_DIR", "torch_extensions", base=cache_home), (".so",), None),
    ]


def _outside_location(
    found_in: str, root: Path | None, suffixes: tuple[str, ...], depth: int | None, walk: _Walk
) -> tuple[Path | None, list[Binary]]:
    if root is None or not root.is_dir():
        return root, []
    reason = _unsafe_folder(root)
    if reason:
        walk.skip(reason)
        return root, []
    return root, [Binary(p, found_in) for p in _newest_first(_files_below(root, walk, suffixes, depth))]


def _locations(
    extra: Sequence[str | os.PathLike[str]], source_root: Path | None, walk: _Walk
) -> Iterator[tuple[str, Path | None, list[Binary]]]:
    """(found_in, folder, binaries newest first) of each location in turn, each walked only when
    the search reaches it."""
    yield "registered path", None, [Binary(p, "registered path") for p in _registered(extra, walk)]
    for cache in ("nvcc", "static"):
        yield (f"{cache} cache", *_plugin_entries(cache, walk, source_root))
    for found_in, root, suffixes, depth in _outside_roots():
        yield (found_in, *_outside_location(found_in, root, suffixes, depth, walk))


# --------------------------------------------------------------------------------------------
# Reading files


def _device_code_offset(path: Path, found_in: str) -> int | None:
    """Where the device code starts in a CuPy cache file, 0 elsewhere; None for a CuPy file that
    holds no cubin (PTX, or damaged). CuPy writes a hex digest in front of the cubin, and for a
    module built with ``name_expressions`` a table of the mangled names after the digest
    (``\x93CUPYNE``...)."""
    if found_in != "cupy cache":
        return 0
    with open(path, "rb") as fh:
        head = fh.read(_CUPY_HEAD_BYTES)
    digest = 0
    while digest < len(head) and head[digest] in _HEX_DIGITS:
        digest += 1
    if digest < _CUPY_DIGEST_MIN:
        return None
    at = head.find(_ELF_MAGIC, digest)
    if at < 0 or (at != digest and not head.startswith(_CUPY_NAMES_MARK, digest)):
        return None
    return at


def _holds_name(path: Path, needle: bytes, walk: _Walk) -> bool:
    try:
        st = path.stat()
        if st.st_mode & stat.S_IWOTH:
            walk.skip(f"{path} is writable by every user")
            return False
        if st.st_size > walk.max_bytes:
            walk.skip(f"{path}: {st.st_size} bytes, over the {walk.max_bytes}-byte limit")
            return False
        if st.st_size == 0:
            return False
        walk.files_read += 1
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(needle) >= 0
    except (OSError, ValueError):
        return False


def find_binary(
    kernel: str,
    *,
    extra: Sequence[str | os.PathLike[str]] = (),
    source_root: str | os.PathLike[str] | None = None,
    max_files: int = DEFAULT_MAX_FILES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    accept: Callable[[Binary], bool] | None = None,
) -> BinarySearch:
    """The newest binary that defines ``kernel`` (the driver's name for it), searched in the order
    of :data:`LOCATIONS`. ``extra`` are the registered paths. ``source_root`` keeps, in the
    plugin's own caches, only builds of sources under that folder (one side's checkout, when the
    two sides of a comparison were both built into the cache); the other caches do not record
    their sources and are searched as they are. Never raises for a missing tool or location: the
    result says what was searched and skipped. ``accept`` (optional) passes over a binary that
    defines the kernel but is not the one wanted (its resources differ from what the driver
    reported for the loaded kernel, say)."""
    if not kernel or "\0" in kernel:
        raise ValueError(f"kernel: expected a symbol name, got {kernel!r}")
    walk = _Walk(max_files=max_files, max_bytes=max_bytes)
    root = Path(source_root) if source_root is not None else None
    needle = b"\0" + kernel.encode() + b"\0"
    searched: list[str] = []
    for found_in, folder, binaries in _locations(extra, root, walk):
        if folder is None and not binaries:
            continue
        read_before = walk.files_read
        hit = _first_match(binaries, kernel, needle, walk, accept)
        where = f" in {folder}" if folder is not None else ""
        searched.append(f"{found_in}: {walk.files_read - read_before} files{where}")
        if hit is not None:
            binary, confirmed = hit
            return BinarySearch(kernel, binary, tuple(searched), tuple(walk.skipped), walk.files_read, confirmed)
        if walk.files_read >= walk.max_files:
            walk.skip(f"stopped after reading {walk.max_files} files")
            break
    return BinarySearch(kernel, None, tuple(searched), tuple(walk.skipped), walk.files_read)


def _first_match(
    binaries: Sequence[Binary], kernel: str, needle: bytes, walk: _Walk, accept: Callable[[Binary], bool] | None
) -> tuple[Binary, bool] | None:
    for binary in binaries:
        if walk.files_read >= walk.max_files:
            return None
        if not _holds_name(binary.path, needle, walk):
            continue
        try:
            offset = _device_code_offset(binary.path, binary.found_in)
        except OSError:
            continue
        if offset is None:
            continue
        candidate = dataclasses.replace(binary, offset=offset)
        try:
            if _lists_function(candidate, kernel) and (accept is None or accept(candidate)):
                return candidate, True
        except ToolchainMissing:
            return candidate, False
        except (UnreadableBinary, OSError) as exc:
            # it holds the name, so say why it was not taken (a cubin newer than cuobjdump, say)
            walk.skip(f"{binary.path} holds the name but cannot be read: {' '.join(str(exc).split())[:160]}")
            continue
    return None
