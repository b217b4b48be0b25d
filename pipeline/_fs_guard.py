"""The filesystem gate: write-intent, edit-intent, read-before-edit (PIPELINE.md §9).

It lives below the pipeline, inside the filesystem tools' bodies, and applies only to their
own mutations. Observed state is kept per (agent, resolved key) and shared by every call of
the session that owns the gate, Code-Mode sub-calls included::

    unseen  -> never read by this agent
    absent  -> read, and the file did not exist
    present -> read or written at ``version``

``read_before_edit(gate)`` installs the policy (the single write-intent and edit-intent
deciders). Without it writes and edits are unconditional. Authorization is version
freshness, not "saw the whole file". The two guarded failures get a remedy appended while
keeping their code: ``FS_NOT_OBSERVED`` " — read the file, then retry", ``FS_STALE_VERSION``
" — re-read the file, then retry".
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any, Callable, Literal, Protocol

import msgspec

from ._definition import tool
from ._errors import FsNotFoundError, FsNotObservedError, FsStaleVersionError
from ._execution import RunContext
from .events import Event, FsObserved

__all__ = [
    "CreateIfAbsent",
    "FileStore",
    "FsGate",
    "LocalFileStore",
    "ReplaceIfVersion",
    "Unconditional",
    "fs_tools",
    "read_before_edit",
]

NOT_OBSERVED_REMEDY = " — read the file, then retry"
STALE_REMEDY = " — re-read the file, then retry"


class Unconditional(msgspec.Struct, frozen=True):
    """Write whatever is there."""


class CreateIfAbsent(msgspec.Struct, frozen=True):
    """Create only if the file does not exist (else ``FS_NOT_OBSERVED``)."""


class ReplaceIfVersion(msgspec.Struct, frozen=True):
    """Replace only if the file is still at ``version`` (else ``FS_STALE_VERSION``)."""

    version: str


WriteCondition = Unconditional | CreateIfAbsent | ReplaceIfVersion


class FileStore(Protocol):
    """The provider: resolves paths to keys and enforces write conditions atomically."""

    def resolve(self, path: str) -> str: ...

    def read(self, key: str) -> tuple[str, str]: ...

    def write(self, key: str, text: str, condition: WriteCondition) -> str: ...


class LocalFileStore:
    """Files under ``root`` (paths may not escape it). Versions are content hashes, so an
    external change is always detected. Conditional writes are atomic within the process."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self._lock = threading.Lock()

    def resolve(self, path: str) -> str:
        """The resolved absolute path (the gate's key). Raises ``ValueError`` outside root."""
        target = (self.root / path).resolve()
        if target != self.root and self.root not in target.parents:
            raise ValueError(f'"{path}" is outside the workspace')
        return str(target)

    @staticmethod
    def _version(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()[:16]

    def read(self, key: str) -> tuple[str, str]:
        """(text, version). Raises ``FsNotFoundError``."""
        try:
            data = Path(key).read_bytes()
        except FileNotFoundError:
            raise FsNotFoundError(f'file not found: "{self.display(key)}"') from None
        return data.decode("utf-8", errors="replace"), self._version(data)

    def write(self, key: str, text: str, condition: WriteCondition) -> str:
        """Write under ``condition``; return the new version."""
        path = Path(key)
        data = text.encode("utf-8")
        with self._lock:
            current = self._version(path.read_bytes()) if path.exists() else None
            shown = self.display(key)
            if isinstance(condition, CreateIfAbsent) and current is not None:
                raise FsNotObservedError(f'"{shown}" already exists and was not read first')
            if isinstance(condition, ReplaceIfVersion):
                if current is None:
                    raise FsStaleVersionError(f'"{shown}" was removed since it was last read')
                if current != condition.version:
                    raise FsStaleVersionError(f'"{shown}" changed since it was last read')
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return self._version(data)

    def display(self, key: str) -> str:
        """``key`` relative to the root, for messages."""
        try:
            return str(Path(key).relative_to(self.root))
        except ValueError:
            return key


Observed = tuple[Literal["unseen", "absent", "present"], str | None]


class FsGate:
    """Observed state plus the single write-intent and edit-intent deciders.

    Args:
        append: where ``fs/observed`` events go (e.g. ``session.log.append``); optional.
    """

    def __init__(self, append: Callable[[Event], Any] | None = None) -> None:
        self._append = append
        self._state: dict[tuple[str | None, str], Observed] = {}
        self._listeners: list[Callable[[str | None, str, str, str | None], Any]] = []
        self._write_deciders: list[Callable[[str | None, str], WriteCondition]] = []
        self._edit_deciders: list[Callable[[str | None, str], WriteCondition]] = []
        self._lock = threading.Lock()

    def state(self, agent: str | None, key: str) -> Observed:
        with self._lock:
            return self._state.get((agent, key), ("unseen", None))

    def observe(self, agent: str | None, key: str, state: Literal["absent", "present"], version: str | None = None) -> None:
        """Record an observation, log ``fs/observed``, notify listeners synchronously (a
        raising listener propagates: the tool call fails though the effect happened)."""
        with self._lock:
            self._state[(agent, key)] = (state, version if state == "present" else None)
        if self._append is not None:
            self._append(FsObserved(key=key, state=state, agent=agent,
                                    version=version if version is not None else msgspec.UNSET))
        for listener in tuple(self._listeners):
            listener(agent, key, state, version)

    def on_observed(self, listener: Callable[[str | None, str, str, str | None], Any]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _slot(self, slot: list[Any], decider: Any) -> Callable[[], None]:
        slot.append(decider)
        return lambda: slot.remove(decider) if decider in slot else None

    def set_write_intent(self, decider: Callable[[str | None, str], WriteCondition]) -> Callable[[], None]:
        """Register a write-intent decider; the first registered one decides."""
        return self._slot(self._write_deciders, decider)

    def set_edit_intent(self, decider: Callable[[str | None, str], WriteCondition]) -> Callable[[], None]:
        """Register an edit-intent decider; the first registered one decides."""
        return self._slot(self._edit_deciders, decider)

    def write_condition(self, agent: str | None, key: str) -> WriteCondition:
        return self._write_deciders[0](agent, key) if self._write_deciders else Unconditional()

    def edit_condition(self, agent: str | None, key: str) -> WriteCondition:
        return self._edit_deciders[0](agent, key) if self._edit_deciders else Unconditional()

    def clear(self) -> None:
        """Forget every observation (plugin disposal)."""
        with self._lock:
            self._state.clear()


def read_before_edit(gate: FsGate, *, display: Callable[[str], str] = lambda key: key) -> Callable[[], None]:
    """Install the read-before-edit policy as the gate's deciders; return a disposer that
    removes them and forgets the observations."""

    def write_intent(agent: str | None, key: str) -> WriteCondition:
        state, version = gate.state(agent, key)
        if state == "present" and version is not None:
            return ReplaceIfVersion(version)
        return CreateIfAbsent()

    def edit_intent(agent: str | None, key: str) -> WriteCondition:
        state, version = gate.state(agent, key) if agent is not None else ("unseen", None)
        if state == "unseen":
            raise FsNotObservedError(f'edit requires reading "{display(key)}" first')
        if state == "absent":
            raise FsNotFoundError(f'file not found: "{display(key)}"')
        assert version is not None
        return ReplaceIfVersion(version)

    undo_write = gate.set_write_intent(write_intent)
    undo_edit = gate.set_edit_intent(edit_intent)

    def dispose() -> None:
        undo_write()
        undo_edit()
        gate.clear()

    return dispose


def _with_remedy(exc: Exception) -> Exception:
    if isinstance(exc, FsStaleVersionError):
        return FsStaleVersionError(exc.message + STALE_REMEDY)
    if isinstance(exc, FsNotObservedError):
        return FsNotObservedError(exc.message + NOT_OBSERVED_REMEDY)
    return exc


def fs_tools(store: FileStore, gate: FsGate) -> list[Any]:
    """``read``, ``write`` and ``edit`` tools over ``store``, gated by ``gate``."""

    def key_of(path: str) -> str:
        return store.resolve(path)

    @tool(name="read", concurrency_safe=True)
    async def read(path: str, ctx: RunContext) -> str:
        """Read a UTF-8 text file.

        Args:
            path: path relative to the workspace
        """
        key = key_of(path)
        agent = ctx.execution.agent
        try:
            text, version = store.read(key)
        except FsNotFoundError:
            gate.observe(agent, key, "absent")
            raise
        gate.observe(agent, key, "present", version)
        return text

    @tool(name="write")
    async def write(path: str, content: str, ctx: RunContext) -> str:
        """Create or overwrite a text file.

        Args:
            path: path relative to the workspace
            content: the whole new content
        """
        key = key_of(path)
        agent = ctx.execution.agent
        try:
            version = store.write(key, content, gate.write_condition(agent, key))
        except (FsNotObservedError, FsStaleVersionError) as exc:
            raise _with_remedy(exc) from None
        gate.observe(agent, key, "present", version)
        return f"wrote {len(content)} characters to {path}"

    @tool(name="edit")
    async def edit(path: str, old: str, new: str, ctx: RunContext) -> str:
        """Replace the one occurrence of ``old`` with ``new`` in a text file.

        Args:
            path: path relative to the workspace
            old: text to replace; must occur exactly once
            new: replacement text
        """
        key = key_of(path)
        agent = ctx.execution.agent
        try:
            condition = gate.edit_condition(agent, key)
            text, current = store.read(key)
            if isinstance(condition, ReplaceIfVersion) and condition.version != current:
                raise FsStaleVersionError(f'"{path}" changed since it was last read')
            count = text.count(old)
            if count != 1:
                raise ValueError(f'"old" must occur exactly once in "{path}" (found {count})')
            if not isinstance(condition, ReplaceIfVersion):
                condition = ReplaceIfVersion(current)
            version = store.write(key, text.replace(old, new, 1), condition)
        except (FsNotObservedError, FsStaleVersionError) as exc:
            raise _with_remedy(exc) from None
        gate.observe(agent, key, "present", version)
        return f"edited {path}"

    return [read, write, edit]
