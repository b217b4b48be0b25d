"""What the component cache holds, and pruning it.

The cache (`cache_dir()`) keeps, per version of the guest's sources (its key, `source_hash()`),
the built component `guest-<key>.wasm` (~34 MB) and a compiled copy per wasmtime version and
Engine configuration, `guest-<key>-wasmtime<version>-<config>.cwasm` (~50 MB each). Nothing
replaces them: other sources (an upgrade, another checkout) build beside them, so the cache
only grows until `prune` removes every key but the current one.

Only regular files named like these artifacts (and the temporary files of an interrupted
write) are ever listed or removed; the lock files, links, directories and anything else in
the directory are left alone.

Everything that names or writes the cache's files is here, below the component module that
builds and compiles what goes into it: its directory, the key of the sources, the lock and
the atomic write.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import re
import sys
import tempfile
from pathlib import Path
from stat import S_ISREG
from typing import Any

import msgspec

__all__ = ["CachedKey", "Pruned", "cache_dir", "cached_keys", "older_components", "prune",
           "source_hash"]

PACKAGE_DIR = Path(__file__).resolve().parent
GUEST_DIR = PACKAGE_DIR / "guest"
WIT_DIR = PACKAGE_DIR / "wit"


def cache_dir() -> Path:
    """`$CODEMODE_CACHE_DIR`, else `$XDG_CACHE_HOME/codemode`, else `~/.cache/codemode`."""
    explicit = os.environ.get("CODEMODE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "codemode"


def dist_version(name: str) -> str | None:
    """The installed version of the distribution `name` (e.g. "componentize-py"), or None.

    Read from the name of its `*.dist-info` directory on `sys.path`, as pip installs it
    (`_dist_infos`: one scan of `sys.path` per process, ~0.5 ms); `importlib.metadata`
    (imported only when no such directory is found: an egg, a zip) would add ~8 ms to
    every new process's first run."""
    version = _dist_infos().get(_normalized(name))
    if version is not None:
        return version
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@functools.cache
def _dist_infos() -> dict[str, str]:
    """{normalized distribution name: version} of the `*.dist-info` directories on
    `sys.path`, the first entry that has one winning (as imports resolve)."""
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for item in names:
            if not item.endswith(".dist-info"):
                continue
            dist, dash, version = item[:-len(".dist-info")].partition("-")
            if dash:
                found.setdefault(_normalized(dist), version)
    return found


def _sha256() -> Any:
    """A SHA-256 hash object: CPython's own (`_sha2`, `_sha256` before 3.12) when present,
    since `hashlib` loads OpenSSL (~4 ms of a new process's first run)."""
    try:
        from _sha2 import sha256  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:
            from hashlib import sha256
    return sha256()


def source_hash() -> str:
    """SHA-256 over the guest sources (its module list included), the WIT world and the
    componentize-py and tzdata versions."""
    digest = _sha256()
    digest.update(str(dist_version("componentize-py")).encode())
    digest.update((dist_version("tzdata") or "none").encode())
    for root in (GUEST_DIR, WIT_DIR):
        for path in _source_files(str(root)):
            digest.update(os.path.relpath(path, PACKAGE_DIR).encode())
            with open(path, "rb") as source:
                digest.update(source.read())
    hexdigest: str = digest.hexdigest()
    return hexdigest[:24]


def _source_files(root: str) -> list[str]:
    """The `.py`, `.wit` and `.txt` files under `root`, in the order of their paths' parts
    (`sorted(Path(root).rglob("*"))`'s, without pathlib's cost on a new process's path)."""
    found: list[tuple[tuple[str, ...], str]] = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if os.path.splitext(name)[1] in (".py", ".wit", ".txt"):
                path = os.path.join(folder, name)
                found.append((tuple(os.path.relpath(path, root).split(os.sep)), path))
    return [path for _parts, path in sorted(found)]


class _FileLock:
    """An exclusive lock on a file, so two processes do not build the same artifact."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def __enter__(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self._path, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)





# `guest-<key>.wasm`, `guest-<key>-<engine>.cwasm`, and `_write_atomic`'s temporary files.
_ARTIFACT = re.compile(r"guest-([0-9a-f]{24})(?:\.wasm|-[^/]+?\.cwasm)(?:[^/]*\.tmp)?")


class CachedKey(msgspec.Struct, frozen=True, kw_only=True):
    """The artifacts of one version of the guest's sources.

    Attributes:
        key: the sources' hash (`source_hash()`, 24 hex digits).
        files: the artifacts' file names, sorted.
        size_bytes: their total size, in bytes.
        modified: the newest artifact's modification time, in Unix seconds.
        current: whether the key is the sources this installation runs.
    """

    key: str
    files: tuple[str, ...]
    size_bytes: int
    modified: float
    current: bool


class Pruned(msgspec.Struct, frozen=True, kw_only=True):
    """What `prune` removed (or, with `dry_run`, would remove).

    Attributes:
        removed: the removed keys, newest first, as they were listed before.
    """

    removed: tuple[CachedKey, ...]

    @property
    def files(self) -> int:
        """How many files were removed."""
        return sum(len(k.files) for k in self.removed)

    @property
    def size_bytes(self) -> int:
        """Their total size, in bytes."""
        return sum(k.size_bytes for k in self.removed)


def cached_keys(directory: Path | None = None) -> list[CachedKey]:
    """The keys the cache holds, newest first (`directory`: default `cache_dir()`); `[]`
    when the directory does not exist. A file removed while it is read is skipped.

    Raises:
        OSError: the directory cannot be read (not a directory, no permission).
    """
    root = cache_dir() if directory is None else directory
    current = source_hash()
    found: dict[str, list[tuple[str, os.stat_result]]] = {}
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    for name in names:
        match = _ARTIFACT.fullmatch(name)
        if match is None:
            continue
        try:
            stat = os.lstat(root / name)
        except FileNotFoundError:
            continue
        if not S_ISREG(stat.st_mode):      # a directory or a link: nothing the cache wrote
            continue
        found.setdefault(match.group(1), []).append((name, stat))
    keys = [CachedKey(key=key, files=tuple(sorted(name for name, _ in files)),
                      size_bytes=sum(stat.st_size for _, stat in files),
                      modified=max(stat.st_mtime for _, stat in files),
                      current=key == current)
            for key, files in found.items()]
    return sorted(keys, key=lambda k: k.modified, reverse=True)


def prune(*, everything: bool = False, dry_run: bool = False,
          directory: Path | None = None) -> Pruned:
    """Remove the artifacts of every key but the current one (`everything`: the current
    one's too, which the next run builds again, 15-40 s). Holds the build and compile
    locks meanwhile, so no artifact is removed while another process writes it; a process
    that already loaded a compiled component keeps running (its file is mapped, not
    reopened). A `dry_run` only reads the directory: it takes no lock and writes nothing.

    Raises:
        OSError: the directory cannot be read or locked, or a file could not be removed
            (the ones before it are gone).
    """
    root = cache_dir() if directory is None else directory
    if not root.exists():
        return Pruned(removed=())
    if not root.is_dir():              # (locking would try to make it a directory)
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(root))
    with contextlib.ExitStack() as held:
        if not dry_run:                # (a dry run only reads: no lock file made)
            held.enter_context(_FileLock(root / "build.lock"))
            held.enter_context(_FileLock(root / "compile.lock"))
        doomed = tuple(k for k in cached_keys(root) if everything or not k.current)
        if not dry_run:
            for key in doomed:
                for name in key.files:
                    (root / name).unlink(missing_ok=True)
    return Pruned(removed=doomed)


def older_components() -> str:
    """A hint naming what other sources' artifacts take in the cache ("" when none)."""
    try:
        older = sum(k.size_bytes for k in cached_keys() if not k.current)
    except OSError:            # a hint only: the build goes on
        return ""
    if older < 1 << 20:
        return ""
    return (f" (older components in {cache_dir()} take {older / (1 << 20):.1f} MiB; "
            "`codemode cache prune` removes them)")
