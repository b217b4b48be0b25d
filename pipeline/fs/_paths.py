"""Confining paths to a workspace root, before any file is opened.

A path is refused (``FsOutsideRootError``) when

- lexically, after collapsing ``.`` and ``..``, it lies outside the root (``../x``,
  ``a/../../x``, an absolute path elsewhere); ``..`` that stays inside is fine; or
- once every symlink along it is resolved, it lies outside the root (a link anywhere in the
  path, pointing out of the root, dangling or not).

Only metadata is read here (``realpath``). The I/O layer then opens the fully resolved
path with ``O_NOFOLLOW`` so a final component swapped for a symlink afterwards is refused
too (see ``_io``).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from .._errors import InvalidArgumentsError
from ._errors import FsOutsideRootError

__all__ = ["Target", "Workspace", "within"]


def within(path: str, root: str) -> bool:
    """Whether absolute, normalized ``path`` is ``root`` or below it (component-wise)."""
    if path == root:
        return True
    prefix = root if root.endswith(os.sep) else root + os.sep
    return path.startswith(prefix)


class Target(NamedTuple):
    """A confined path.

    Attributes:
        display: root-relative POSIX path as the caller named it, ``..`` collapsed
            (``"."`` for the root); used in messages.
        real: absolute path with every symlink resolved; inside the root; what I/O uses.
        key: the gate's key for this file: ``str(real)``, so aliases share one state.
    """

    display: str
    real: Path
    key: str


class Workspace:
    """A directory that confines every path handed to the filesystem tools.

    Args:
        root: an existing directory (relative paths resolve against the process's cwd now).

    Raises:
        NotADirectoryError: ``root`` is not an existing directory.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        given = os.path.abspath(os.fspath(root))
        real = os.path.realpath(given)
        if not os.path.isdir(real):
            raise NotADirectoryError(f"workspace root {os.fspath(root)!r} is not a directory")
        self._given = given
        self.root = Path(real)
        self._real = real

    def resolve(self, raw: str, *, what: str = "path") -> Target:
        """Confine ``raw`` (relative to the root, or absolute inside it).

        Raises:
            InvalidArgumentsError: empty, or contains a NUL character.
            FsOutsideRootError: traversal out of the root, or a symlink escape.
        """
        if not isinstance(raw, str) or not raw or "\x00" in raw:
            raise InvalidArgumentsError(
                f'invalid arguments: "{what}" must be a non-empty path without NUL'
            )
        if os.path.isabs(raw):
            lexical = os.path.normpath(raw)
            if within(lexical, self._given) and not within(lexical, self._real):
                lexical = os.path.join(self._real, os.path.relpath(lexical, self._given))
        else:
            lexical = os.path.normpath(os.path.join(self._real, raw))
        if not within(lexical, self._real):
            raise FsOutsideRootError(f'path "{raw}" is outside the workspace root')
        real = os.path.realpath(lexical)
        if not within(real, self._real):
            raise FsOutsideRootError(
                f'path "{raw}" leads outside the workspace root through a symlink'
            )
        display = PurePosixPath(*Path(os.path.relpath(lexical, self._real)).parts).as_posix()
        return Target(display=display, real=Path(real), key=real)

    def relative(self, real: str | os.PathLike[str]) -> str:
        """Root-relative POSIX form of an absolute path inside the root."""
        return PurePosixPath(*Path(os.path.relpath(real, self._real)).parts).as_posix()

    def contains(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` resolves (symlinks followed) to a place inside the root."""
        return within(os.path.realpath(path), self._real)
