"""Listing and searching inside a workspace (blocking; run in a worker thread).

Walks never follow symlinked directories, and skip symlinks that resolve outside the root,
so nothing outside the root is listed or read. Results are sorted root-relative POSIX paths.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator

from .._errors import FsNotFoundError
from ._errors import FsNotADirectoryError, FsOutsideRootError
from ._match import compile_glob
from ._paths import Target, Workspace

__all__ = ["find", "grep", "list_directory"]

_BINARY_PROBE_BYTES = 8192


def list_directory(workspace: Workspace, target: Target) -> list[str]:
    """Entry names of a directory, sorted, marked like ``ls -F``: ``"name/"`` for a
    directory, ``"name@"`` for a symlink, plain ``"name"`` otherwise.

    Raises:
        FsNotFoundError: nothing there.  FsNotADirectoryError: not a directory.
    """
    if not os.path.lexists(target.real):
        raise FsNotFoundError(f'directory not found: "{target.display}"')
    if not os.path.isdir(target.real):
        raise FsNotADirectoryError(f'"{target.display}" is not a directory')
    names = []
    with os.scandir(target.real) as entries:
        for entry in entries:
            if entry.is_symlink():
                names.append(entry.name + "@")
            elif entry.is_dir(follow_symlinks=False):
                names.append(entry.name + "/")
            else:
                names.append(entry.name)
    return sorted(names)


def _files(
    workspace: Workspace, start: str, check: Callable[[], None]
) -> Iterator[tuple[str, str]]:
    """``(relative path, absolute path)`` of every file under ``start`` in the root."""
    for directory, subdirs, filenames in os.walk(start, followlinks=False):
        check()
        subdirs.sort()
        for name in sorted(filenames):
            path = os.path.join(directory, name)
            if os.path.islink(path) and not workspace.contains(path):
                continue
            if os.path.isfile(path):
                yield workspace.relative(path), path


def _check_pattern(pattern: str) -> None:
    if os.path.isabs(pattern) or ".." in pattern.split("/"):
        raise FsOutsideRootError(f'glob pattern "{pattern}" reaches outside the workspace root')


def find(workspace: Workspace, pattern: str, check: Callable[[], None]) -> list[str]:
    """Files whose root-relative path matches ``pattern`` (``_match``), sorted.

    Raises:
        FsOutsideRootError: an absolute pattern or one with a ``..`` segment.
    """
    _check_pattern(pattern)
    regex = compile_glob(pattern)
    return sorted(
        rel for rel, _ in _files(workspace, str(workspace.root), check) if regex.fullmatch(rel)
    )


def grep(
    workspace: Workspace,
    regex: re.Pattern[str],
    target: Target,
    file_glob: str | None,
    max_matches: int,
    check: Callable[[], None],
) -> tuple[list[tuple[str, int, str]], bool]:
    """Lines matching ``regex`` (``re.search``) in text files at or under ``target``.

    ``file_glob`` filters files: a pattern with ``/`` matches the root-relative path, one
    without matches the file name. Files with a NUL byte in their first 8 KiB are skipped
    as binary; others are decoded as UTF-8 (bad bytes replaced).

    Returns:
        ``([(path, 1-based line number, line text)], truncated)``; at most
        ``max_matches`` matches, ``truncated`` when more existed.
    Raises:
        FsNotFoundError: nothing at ``target``.  FsOutsideRootError: bad ``file_glob``.
    """
    if not os.path.exists(target.real):
        raise FsNotFoundError(f'path not found: "{target.display}"')
    selector = None
    by_path = False  # a pattern with "/" matches the root-relative path, else the file name
    if file_glob:
        _check_pattern(file_glob)
        selector = compile_glob(file_glob)
        by_path = "/" in file_glob
    if os.path.isdir(target.real):
        files: Iterator[tuple[str, str]] = _files(workspace, str(target.real), check)
    else:
        files = iter([(workspace.relative(target.real), str(target.real))])
    matches: list[tuple[str, int, str]] = []
    for rel, path in files:
        check()
        if selector is not None and not selector.fullmatch(
            rel if by_path else rel.rsplit("/", 1)[-1]
        ):
            continue
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        if b"\x00" in data[:_BINARY_PROBE_BYTES]:
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            if regex.search(line):
                if len(matches) == max_matches:
                    return matches, True
                matches.append((rel, number, line))
    return matches, False
