"""What the component cache holds, and pruning it.

The cache (`cache_dir()`) keeps, per version of the guest's sources (its key, `source_hash()`),
the built component `guest-<key>.wasm` (~34 MB) and a compiled copy per wasmtime version and
Engine configuration, `guest-<key>-wasmtime<version>-<config>.cwasm` (~50 MB each). Nothing
replaces them: other sources (an upgrade, another checkout) build beside them, so the cache
only grows until `prune` removes every key but the current one.

Only regular files named like these artifacts (and the temporary files of an interrupted
write) are ever listed or removed; the lock files, links, directories and anything else in
the directory are left alone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from pathlib import Path
from stat import S_ISREG

import msgspec

from ._component import _FileLock, cache_dir, source_hash

__all__ = ["CachedKey", "Pruned", "cached_keys", "prune"]

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
