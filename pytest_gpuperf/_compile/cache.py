"""The on-disk build cache behind the nvcc libraries, the static tier's cubins and disassemblies,
and the megakernel emulator.

One cache is a private folder (see :mod:`private_dir`)::

    manifests/<base key>.json   the entries built from this base key, and the files each read
    entries/<entry key>/        the artifacts, and build.json (written last) with their sha256
    locks/<base key>.lock       held while building
    staging/<pid>-<host>-*/     builds in progress, renamed into entries/ once complete

The *base key* covers what is known before building: the toolchain's identity, every flag, the
relevant environment, the sources. The compiler's dependency output (``-M``) then names every
file the build read. The manifest stores each one's sha256, and a digest of the listing of each
folder they came from and of each include folder, so that a new header that would shadow one of
them is noticed. A lookup re-hashes those files (memoized per process on size, mtime, ctime and
inode) and takes the first candidate whose files and folders all still match; this is ccache's
"direct mode". A build whose inputs changed while it ran is kept for that call but not recorded.

Entries are verified on every load: a missing or truncated build.json or artifact, or one whose
sha256 differs, is rebuilt in place. Staging folders whose process is gone (or that are older
than an hour, for another host's) are removed before the next build.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_gpuperf._store.files import atomic_write_json
from pytest_gpuperf._store.locks import hold
from pytest_gpuperf._store.private_dir import CACHE_ENV, check_private_dir, ensure_private_dir

__all__ = ["BuildCache", "Built", "CacheEntry", "digest_fields", "file_digest"]

META_FILE = "build.json"
MANIFEST_CANDIDATES = 8  # per base key: e.g. a header switched back and forth stays cached
STALE_STAGING_S = 3600.0
_FORMAT = 1


def _host_tag() -> str:
    """This host and pid namespace: containers that share a hostname do not share pids."""
    try:
        namespace = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        namespace = ""
    return hashlib.sha256(f"{socket.gethostname()}\0{namespace}".encode()).hexdigest()[:8]


_HOST_TAG = _host_tag()
_IGNORED_NAMES = ("__pycache__",)  # and dot-files: editors' swap files must not cost a rebuild


@dataclasses.dataclass(frozen=True)
class Built:
    """What a build left in its staging folder: the artifacts to keep (verified on load), every
    file it read (from the compiler's dependency output), the include folders it searched, and
    what to store with it (the command, the build time)."""

    files: tuple[str, ...]
    dependencies: tuple[Path, ...]
    search_folders: tuple[Path, ...] = ()
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class CacheEntry:
    """A complete, verified entry."""

    folder: Path
    key: str
    meta: Mapping[str, Any]
    cached: bool  # False when this call built it

    def path(self, name: str) -> Path:
        return self.folder / name


def build_key_fields(layout: str, toolchain: str, arguments: Iterable[str]) -> list[tuple[str, str | bytes]]:
    """The fields every build key starts with: the key layout, the toolchain's identity, the
    working folder (a relative path in an argument is relative to it) and every argument."""
    return [
        ("layout", layout),
        ("toolchain", toolchain),
        ("working-folder", str(Path.cwd())),
        *(("argument", a) for a in arguments),
    ]


def digest_fields(fields: Iterable[tuple[str, str | bytes]]) -> str:
    """sha256 over labelled fields, each length-prefixed so no two field lists collide."""
    digest = hashlib.sha256()
    for label, value in fields:
        data = value.encode() if isinstance(value, str) else value
        digest.update(f"{label}={len(data)}:".encode() + data + b";")
    return digest.hexdigest()


def file_digest(path: str | os.PathLike[str]) -> str | None:
    """sha256 of a file's bytes, or None if it cannot be read; memoized per process on the
    file's identity and times, so an unchanged header is hashed once."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _digest_of(os.fspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@functools.lru_cache(maxsize=1 << 16)
def _digest_of(path: str, dev: int, ino: int, size: int, mtime_ns: int, ctime_ns: int) -> str | None:
    try:
        return _sha256_file(Path(path))
    except OSError:
        return None


def _listing_digest(folder: str) -> str:
    try:
        names = sorted(n for n in os.listdir(folder) if not n.startswith(".") and n not in _IGNORED_NAMES)
    except OSError as exc:
        return f"unlistable: {exc.errno}"
    return hashlib.sha256("\0".join(names).encode()).hexdigest()


class BuildCache:
    """One private cache folder; ``get_or_build`` is safe across processes (a file lock per base
    key, re-checked once held) and never publishes half an entry."""

    def __init__(self, folder: Path, *, lock_timeout_s: float = 3600.0, env: str = CACHE_ENV) -> None:
        """``env`` names the variable that moves ``folder``, for the messages."""
        self._env = env
        self.folder = ensure_private_dir(folder, env=env)
        self.lock_timeout_s = lock_timeout_s
        for sub in ("manifests", "entries", "locks", "staging"):
            (self.folder / sub).mkdir(mode=0o700, exist_ok=True)

    # -- lookups ------------------------------------------------------------------------------
    def lookup(self, base_key: str) -> CacheEntry | None:
        """The entry built from ``base_key`` whose recorded inputs all still match, verified; or None."""
        check_private_dir(self.folder, env=self._env)
        for candidate in self._candidates(base_key):
            if _still_matches(candidate):
                entry = self.load(candidate["entry"])
                if entry is not None:
                    return entry
        return None

    def load(self, key: str) -> CacheEntry | None:
        """The entry ``key`` if its build.json is readable and every artifact it lists has the
        recorded size and sha256; None when it is missing or damaged."""
        folder = self.folder / "entries" / key
        try:
            meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or meta.get("format") != _FORMAT or not isinstance(meta.get("files"), dict):
            return None
        for name, want in meta["files"].items():
            path = folder / name
            if not isinstance(want, dict) or "/" in name or path.is_symlink():
                return None
            try:
                size = path.stat().st_size
            except OSError:
                return None
            if size != want.get("size") or _sha256_file(path) != want.get("sha256"):
                return None
        return CacheEntry(folder, key, meta.get("meta") or {}, cached=True)

    def _candidates(self, base_key: str) -> list[dict[str, Any]]:
        try:
            data = json.loads((self.folder / "manifests" / f"{base_key}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []  # none yet, or damaged: rebuilt and rewritten by the next build
        candidates = data.get("candidates") if isinstance(data, dict) and data.get("format") == _FORMAT else None
        return [c for c in candidates if _well_formed(c)] if isinstance(candidates, list) else []

    # -- building -----------------------------------------------------------------------------
    def get_or_build(self, base_key: str, build: Callable[[Path], Built], *, what: str) -> CacheEntry:
        """The cached entry of ``base_key``, or ``build(staging_folder)`` run under the key's lock
        and published. ``what`` names the build in lock messages ("building gemm.cu")."""
        hit = self.lookup(base_key)
        if hit is not None:
            return hit
        lock = self.folder / "locks" / f"{base_key}.lock"
        with hold(lock, timeout_s=self.lock_timeout_s, purpose=what):
            hit = self.lookup(base_key)  # another process may have built it while we waited
            if hit is not None:
                return hit
            self.clean_staging()
            staging = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-{_HOST_TAG}-", dir=self.folder / "staging"))
            try:
                started_ns = time.time_ns()
                built = build(staging)
                return self._publish(base_key, staging, built, started_ns)
            finally:
                if staging.exists():
                    shutil.rmtree(staging, ignore_errors=True)

    def _publish(self, base_key: str, staging: Path, built: Built, started_ns: int) -> CacheEntry:
        inside = str(staging) + os.sep
        deps = [str(d) for d in dict.fromkeys(built.dependencies) if not str(d).startswith(inside)]
        digests = [(d, file_digest(d)) for d in deps]
        folders = sorted({os.path.dirname(d) for d in deps} | {str(f) for f in built.search_folders})
        key = digest_fields([("base", base_key), *(("dep", f"{d}\0{h}") for d, h in digests)])
        files = {}
        for name in built.files:
            path = staging / name
            files[name] = {"size": path.stat().st_size, "sha256": _sha256_file(path)}
        # build.json last: an entry whose build.json is readable has every artifact complete.
        meta = {"format": _FORMAT, "key": key, "base": base_key, "files": files, "meta": dict(built.meta)}
        (staging / META_FILE).write_text(json.dumps(meta, indent=1), encoding="utf-8")
        entry = self.folder / "entries" / key
        if entry.exists():  # damaged (or unrecorded): we hold the base key's lock
            shutil.rmtree(entry)
        os.replace(staging, entry)
        if all(h is not None and not _changed_since(d, started_ns) for d, h in digests):
            self._record(
                base_key,
                {
                    "entry": key,
                    "dependencies": digests,
                    "folders": [(f, _listing_digest(f)) for f in folders],
                },
            )
        return CacheEntry(entry, key, dict(built.meta), cached=False)

    def _record(self, base_key: str, candidate: dict[str, Any]) -> None:
        others = [c for c in self._candidates(base_key) if c["entry"] != candidate["entry"]]
        payload = {"format": _FORMAT, "candidates": [candidate, *others][:MANIFEST_CANDIDATES]}
        atomic_write_json(self.folder / "manifests" / f"{base_key}.json", payload)

    def clean_staging(self) -> list[Path]:
        """Remove staging folders left by builds that were killed: this host's whose process is
        gone, and another host's untouched for STALE_STAGING_S. Returns what was removed."""
        removed = []
        now = time.time()
        for child in (self.folder / "staging").iterdir():
            pid_text, _, rest = child.name.partition("-")
            host = rest.partition("-")[0]
            try:
                age = now - child.lstat().st_mtime
            except OSError:
                continue
            if host == _HOST_TAG and pid_text.isdigit():
                abandoned = not _alive(int(pid_text))
            else:  # another host's: its process cannot be asked
                abandoned = age > STALE_STAGING_S
            if abandoned:
                shutil.rmtree(child, ignore_errors=True)
                removed.append(child)
        return removed


def _well_formed(candidate: Any) -> bool:
    if not isinstance(candidate, dict) or not isinstance(candidate.get("entry"), str):
        return False
    pairs = [candidate.get("dependencies"), candidate.get("folders")]
    return all(isinstance(p, list) and all(isinstance(x, list) and len(x) == 2 for x in p) for p in pairs)


def _still_matches(candidate: Mapping[str, Any]) -> bool:
    return all(file_digest(path) == digest for path, digest in candidate["dependencies"]) and all(
        _listing_digest(folder) == digest for folder, digest in candidate["folders"]
    )


def _changed_since(path: str, started_ns: int) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return True
    return max(st.st_mtime_ns, st.st_ctime_ns) >= started_ns


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
