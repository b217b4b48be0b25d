"""``WorkspaceStore``: the file provider under the filesystem gate (docs/pipeline-spec.md §9).

The gate (``codemode.pipeline.FsGate`` with the ``read_before_edit`` policy) decides a *condition*
for each mutation; this store enforces it atomically against the disk:

=====================  ==================================================================
condition              enforcement (check and replacement under one lock)
=====================  ==================================================================
``Unconditional``      write whatever is there
``CreateIfAbsent``     something exists -> ``FS_NOT_OBSERVED``; else create (``os.link``)
``ReplaceIfVersion``   missing, or other bytes than at that version -> ``FS_STALE_VERSION``;
                       else replace (temporary file + ``os.replace``)
=====================  ==================================================================

The lock serializes every mutation through this store, so calls of the session never
interleave between check and replacement (a process outside the session writing in that
instant can still race; no portable file API closes that gap). Keys are fully resolved
absolute paths (``Target.key``), so aliases through symlinks inside the root share one
observation. Messages here are bare; the tools append the remedies.

Besides the richer ``load``/``put``/``edit`` used by ``filesystem_tools``, the store also
satisfies ``codemode.pipeline.FileStore`` (``resolve``/``read``/``write``) for other tools over the
same gate.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .._errors import FsNotFoundError, FsNotObservedError, FsStaleVersionError
from .._fs_guard import CreateIfAbsent, ReplaceIfVersion, Unconditional
from . import _io
from ._paths import Target, Workspace
from ._version import Version

__all__ = ["WorkspaceStore"]

T = TypeVar("T")


class WorkspaceStore:
    """Files under one workspace root.

    Args:
        root: an existing directory (see ``Workspace``).

    Raises:
        NotADirectoryError: ``root`` is not a directory.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.workspace = Workspace(root)
        self._lock = threading.Lock()

    # -- pipeline.FileStore ---------------------------------------------------------------
    def resolve(self, path: str) -> str:
        """The gate key of ``path``. Raises ``FsOutsideRootError`` (see ``Workspace``)."""
        return self.workspace.resolve(path).key

    def read(self, key: str) -> tuple[str, str]:
        """``(text, version)`` of the file at ``key`` (undecodable bytes replaced).
        Raises ``FsNotFoundError``."""
        data, version = self.load(self._target(key))
        return data.decode("utf-8", "replace"), str(version)

    def write(self, key: str, text: str, condition: Any) -> str:
        """Write ``text`` (UTF-8) under ``condition``; return the new version."""
        return str(self.put(self._target(key), text.encode("utf-8"), condition)[0])

    def display(self, key: str) -> str:
        """``key`` relative to the root, for messages (the key itself when outside)."""
        return self.workspace.relative(key) if self.workspace.contains(key) else key

    def _target(self, key: str) -> Target:
        return self.workspace.resolve(key)

    # -- richer operations ----------------------------------------------------------------
    def target(self, path: str) -> Target:
        """Confine ``path``; see ``Workspace.resolve``."""
        return self.workspace.resolve(path)

    def load(self, target: Target) -> tuple[bytes, Version]:
        """The file's bytes and version (blocking).

        Raises:
            FsNotFoundError: nothing there.  FsNotAFileError, FsOutsideRootError: ``_io.load``.
        """
        found = _io.load(target)
        if found is None:
            raise FsNotFoundError(f'file not found: "{target.display}"')
        return found[0], Version.of(*found)

    def put(self, target: Target, data: bytes, condition: Any) -> tuple[Version, bool]:
        """Write ``data`` under ``condition`` (blocking); return ``(new version, created)``.

        Raises:
            FsNotObservedError: ``CreateIfAbsent`` and something is there.
            FsStaleVersionError: ``ReplaceIfVersion`` and the file changed or vanished.
        """
        with self._lock:
            current = _io.load(target)
            created = self._check(target, condition, current)
            info = _io.create(target, data) if created else _io.replace(target, data, current[1])  # type: ignore[index]
            return Version.of(data, info), created

    def edit(
        self, target: Target, condition: Any, change: Callable[[bytes], tuple[bytes, T]]
    ) -> tuple[Version, T]:
        """Replace the file with ``change(current bytes)[0]`` under ``condition`` (blocking);
        return ``(new version, change(...)[1])``. ``change`` runs under the lock and may
        raise to refuse the edit.

        Raises:
            FsNotFoundError: nothing there (under any condition but a stale version).
            FsStaleVersionError: ``ReplaceIfVersion`` and the file changed or vanished.
        """
        with self._lock:
            current = _io.load(target)
            if current is None and not isinstance(condition, ReplaceIfVersion):
                raise FsNotFoundError(f'file not found: "{target.display}"')
            self._check(target, condition, current)
            assert current is not None
            data, extra = change(current[0])
            info = _io.replace(target, data, current[1])
            return Version.of(data, info), extra

    @staticmethod
    def _check(
        target: Target, condition: Any, current: tuple[bytes, os.stat_result] | None
    ) -> bool:
        """Enforce ``condition`` on ``current``; ``True`` when the file is to be created."""
        if isinstance(condition, Unconditional):
            return current is None
        if isinstance(condition, CreateIfAbsent):
            if current is not None:
                raise FsNotObservedError(
                    f'"{target.display}" already exists and was not read first'
                )
            return True
        if isinstance(condition, ReplaceIfVersion):
            if current is None:
                raise FsStaleVersionError(f'"{target.display}" was removed since it was last read')
            expected = Version.parse(condition.version)
            if expected is None or not expected.same_content(Version.of(*current)):
                raise FsStaleVersionError(f'"{target.display}" changed since it was last read')
            return False
        raise TypeError(f"unknown write condition {condition!r}")
