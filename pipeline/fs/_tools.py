"""``filesystem_tools``: read, write, edit, list, glob and grep confined to one directory.

Each ``read`` records an observation in the session's ``FsGate``; ``write`` and ``edit`` ask
the gate's write-intent / edit-intent decider for a condition and the ``WorkspaceStore``
enforces it atomically (read-before-edit, docs/pipeline-spec.md §9). The two guarded failures get
their remedies appended here, codes kept: ``FS_NOT_OBSERVED`` + " — read the file, then
retry", ``FS_STALE_VERSION`` + " — re-read the file, then retry".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
from msgspec import Meta

from .._definition import ToolDefinition, tool
from .._errors import (
    AbortedError,
    FsNotFoundError,
    FsNotObservedError,
    FsStaleVersionError,
    InvalidArgumentsError,
)
from .._execution import RunContext
from .._fs_guard import FsGate
from ._attach import attach_store
from ._errors import FsEditError, FsNotTextError
from ._search import find, grep, list_directory
from ._store import WorkspaceStore

if TYPE_CHECKING:
    from .._session import Session

__all__ = ["READ_REMEDY", "REREAD_REMEDY", "EditResult", "GrepMatch", "GrepResult", "WriteResult",
           "filesystem_tools"]

READ_REMEDY = " — read the file, then retry"
REREAD_REMEDY = " — re-read the file, then retry"

Line = Annotated[int, Meta(ge=1)]


class WriteResult(msgspec.Struct, frozen=True):
    """Value of ``write``: root-relative ``path``, ``bytes`` written (UTF-8), ``created``."""

    path: str
    bytes: int
    created: bool


class EditResult(msgspec.Struct, frozen=True):
    """Value of ``edit``: root-relative ``path`` and how many occurrences were replaced."""

    path: str
    replacements: int


class GrepMatch(msgspec.Struct, frozen=True):
    """One matching line: root-relative ``path``, 1-based ``line`` number, its ``text``."""

    path: str
    line: int
    text: str


class GrepResult(msgspec.Struct, frozen=True):
    """Value of ``grep``: matches in path order; ``truncated`` when the cap cut them off."""

    matches: list[GrepMatch]
    truncated: bool


@contextlib.contextmanager
def _remedies() -> Iterator[None]:
    try:
        yield
    except FsNotObservedError as exc:
        raise FsNotObservedError(exc.message + READ_REMEDY) from None
    except FsStaleVersionError as exc:
        raise FsStaleVersionError(exc.message + REREAD_REMEDY) from None


def _checker(ctx: RunContext) -> Callable[[], None]:
    """A check for long walks: raises ``AbortedError`` once the call's signal aborted."""
    def check() -> None:
        if ctx.signal.aborted:
            raise AbortedError("tool call aborted")

    return check


def _render_write(args: Any, value: Any) -> str:
    note = " (new file)" if value["created"] else ""
    return f'wrote {value["bytes"]} bytes to "{value["path"]}"{note}'


def _render_edit(args: Any, value: Any) -> str:
    count = value["replacements"]
    return f'edited "{value["path"]}" ({count} replacement{"" if count == 1 else "s"})'


def _render_list(args: Any, value: Any) -> str:
    return "\n".join(value) if value else "(empty directory)"


def _render_glob(args: Any, value: Any) -> str:
    return "\n".join(value) if value else "no files match"


def _render_grep(args: Any, value: Any) -> str:
    lines = [f'{m["path"]}:{m["line"]}:{m["text"]}' for m in value["matches"]]
    if value["truncated"]:
        lines.append(f"[stopped after {len(value['matches'])} matches]")
    return "\n".join(lines) if lines else "no matches"


def filesystem_tools(
    root: str | os.PathLike[str],
    *,
    session: Session,
    gate: FsGate | None = None,
    max_grep_matches: int = 500,
) -> list[ToolDefinition]:
    """The workspace tools ``read``, ``write``, ``edit``, ``list``, ``glob``, ``grep``.

    Every path argument is relative to ``root`` (or absolute inside it); traversal out of
    the root and symlink escapes fail ``FS_OUTSIDE_ROOT`` before any file is opened. Only
    ``read``, ``list``, ``glob`` and ``grep`` are concurrency-safe. Observations are kept
    per calling agent (``RunContext.execution.agent``); as docs/pipeline-spec.md §9 says, an edit by
    a call without an agent is always ``FS_NOT_OBSERVED``.

    Args:
        root: an existing directory.
        session: the ``Session`` the tools will be registered on. Its gate
            (``session_gate``: ``read_before_edit`` installed, ``fs/observed`` logged to
            ``session.log``) holds the observed state, shared by every toolset of the session.
        gate: use this ``FsGate`` instead (its deciders, if any, set the policy; without
            them writes and edits are unconditional).
        max_grep_matches: most matches one ``grep`` returns (> 0).

    Returns:
        Six definitions, in that order; register them with ``session.register``.
    Raises:
        NotADirectoryError: ``root`` is not a directory.  ValueError: bad ``max_grep_matches``.
    """
    if max_grep_matches < 1:
        raise ValueError("max_grep_matches must be >= 1")
    store = WorkspaceStore(root)
    workspace = store.workspace
    fs_gate = gate if gate is not None else attach_store(session, store)

    @tool(name="read", concurrency_safe=True)
    async def read(
        ctx: RunContext, path: str, offset: Line | None = None, limit: Line | None = None
    ) -> str:
        """Read a UTF-8 text file of the workspace (undecodable bytes are replaced).
        Reading a file is required before `edit` and before `write` replaces it.

        Args:
            path: file path relative to the workspace root.
            offset: first line to return, 1-based (default: 1).
            limit: how many lines to return (default: all to the end).
        """
        target = store.target(path)
        agent = ctx.execution.agent
        try:
            data, version = await asyncio.to_thread(store.load, target)
        except FsNotFoundError:
            fs_gate.observe(agent, target.key, "absent")
            raise
        fs_gate.observe(agent, target.key, "present", str(version))
        text = data.decode("utf-8", "replace")
        if offset is None and limit is None:
            return text
        start = (offset or 1) - 1
        lines = text.splitlines(keepends=True)
        return "".join(lines[start:] if limit is None else lines[start:start + limit])

    @tool(name="write", render=_render_write)
    async def write(ctx: RunContext, path: str, content: str) -> WriteResult:
        """Create a file, or replace one you have read, with `content` (UTF-8).
        Missing parent directories are created.

        Args:
            path: file path relative to the workspace root.
            content: the complete new file content.
        """
        target = store.target(path)
        agent = ctx.execution.agent
        data = content.encode("utf-8")
        with _remedies():
            condition = fs_gate.write_condition(agent, target.key)
            version, created = await asyncio.to_thread(store.put, target, data, condition)
        fs_gate.observe(agent, target.key, "present", str(version))
        return WriteResult(path=target.display, bytes=len(data), created=created)

    @tool(name="edit", render=_render_edit)
    async def edit(
        ctx: RunContext, path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        """Replace exact text in a file you have read. `old_string` must occur exactly once
        unless `replace_all` is true.

        Args:
            path: file path relative to the workspace root.
            old_string: the exact text to replace (non-empty).
            new_string: the replacement text.
            replace_all: replace every occurrence instead of exactly one.
        """
        target = store.target(path)
        agent = ctx.execution.agent
        if not old_string:
            raise FsEditError("old_string must not be empty")
        if old_string == new_string:
            raise FsEditError("old_string and new_string are identical; nothing to change")

        def change(data: bytes) -> tuple[bytes, int]:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise FsNotTextError(f'"{target.display}" is not UTF-8 text') from None
            count = text.count(old_string)
            if count == 0:
                raise FsEditError(f'old_string not found in "{target.display}"')
            if count > 1 and not replace_all:
                raise FsEditError(
                    f'old_string occurs {count} times in "{target.display}"; '
                    "include more context to make it unique, or set replace_all"
                )
            return text.replace(old_string, new_string).encode("utf-8"), count

        with _remedies():
            condition = fs_gate.edit_condition(agent, target.key)
            version, count = await asyncio.to_thread(store.edit, target, condition, change)
        fs_gate.observe(agent, target.key, "present", str(version))
        return EditResult(path=target.display, replacements=count)

    @tool(name="list", concurrency_safe=True, render=_render_list)
    async def list_entries(ctx: RunContext, path: str = ".") -> list[str]:
        """List a workspace directory: names sorted, directories end in "/", symlinks in "@".

        Args:
            path: directory path relative to the workspace root (default: the root).
        """
        target = store.target(path)
        return await asyncio.to_thread(list_directory, workspace, target)

    @tool(name="glob", concurrency_safe=True, render=_render_glob)
    async def glob_files(ctx: RunContext, pattern: str) -> list[str]:
        """Find workspace files by path pattern, e.g. "**/*.py" or "src/*.txt"
        (`*` and `?` stay within a directory, `**` spans directories). Paths are sorted.

        Args:
            pattern: glob pattern relative to the workspace root.
        """
        return await asyncio.to_thread(find, workspace, pattern, _checker(ctx))

    @tool(name="grep", concurrency_safe=True, render=_render_grep)
    async def grep_lines(
        ctx: RunContext, pattern: str, path: str = ".", glob: str | None = None
    ) -> GrepResult:
        """Search text files for lines matching a regular expression (Python syntax).

        Args:
            pattern: the regular expression, searched within each line.
            path: file or directory to search, relative to the workspace root.
            glob: only files matching this pattern ("*.py" matches names, "src/**" paths).
        """
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise InvalidArgumentsError(
                f'invalid arguments: "pattern" is not a valid regular expression ({exc})'
            ) from None
        target = store.target(path)
        found, truncated = await asyncio.to_thread(
            grep, workspace, regex, target, glob, max_grep_matches, _checker(ctx)
        )
        return GrepResult(matches=[GrepMatch(p, n, t) for p, n, t in found], truncated=truncated)

    return [read, write, edit, list_entries, glob_files, grep_lines]
