"""The filesystem gate: write-intent, edit-intent, read-before-edit (docs/pipeline-spec.md §9).

It lives below the pipeline, inside the filesystem tools' bodies, and applies only to their
own mutations. Observed state is kept per (agent, resolved key) and shared by every call of
the session that owns the gate, Code-Mode sub-calls included::

    unseen  -> never read by this agent
    absent  -> read, and the file did not exist
    present -> read or written at ``version``

``read_before_edit(gate)`` installs the policy (the single write-intent and edit-intent
deciders). Without it writes and edits are unconditional. Authorization is version
freshness, not "saw the whole file". A ``FileStore`` (``codemode.pipeline.fs.WorkspaceStore``)
enforces the decided conditions atomically; the tools (``codemode.pipeline.fs.filesystem_tools``)
append the remedies to the two guarded failures.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal, Protocol

import msgspec

from ._errors import FsNotFoundError, FsNotObservedError
from .events import Event, FsObserved

__all__ = [
    "CreateIfAbsent",
    "FileStore",
    "FsGate",
    "ReplaceIfVersion",
    "Unconditional",
    "read_before_edit",
]


class Unconditional(msgspec.Struct, frozen=True):
    """Write whatever is there."""


class CreateIfAbsent(msgspec.Struct, frozen=True):
    """Create only if the file does not exist (else ``FS_NOT_OBSERVED``)."""


class ReplaceIfVersion(msgspec.Struct, frozen=True):
    """Replace only if the file is still at ``version`` (else ``FS_STALE_VERSION``)."""

    version: str


WriteCondition = Unconditional | CreateIfAbsent | ReplaceIfVersion


class FileStore(Protocol):
    """The provider: resolves paths to keys and enforces write conditions atomically
    (implemented by ``codemode.pipeline.fs.WorkspaceStore``)."""

    def resolve(self, path: str) -> str: ...

    def read(self, key: str) -> tuple[str, str]: ...

    def write(self, key: str, text: str, condition: WriteCondition) -> str: ...


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

    def observe(
        self,
        agent: str | None,
        key: str,
        state: Literal["absent", "present"],
        version: str | None = None,
    ) -> None:
        """Record an observation, log ``fs/observed``, notify listeners synchronously (a
        raising listener propagates: the tool call fails though the effect happened)."""
        with self._lock:
            self._state[(agent, key)] = (state, version if state == "present" else None)
        if self._append is not None:
            self._append(FsObserved(key=key, state=state, agent=agent,
                                    version=version if version is not None else msgspec.UNSET))
        for listener in tuple(self._listeners):
            listener(agent, key, state, version)

    def on_observed(
        self, listener: Callable[[str | None, str, str, str | None], Any]
    ) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _slot(self, slot: list[Any], decider: Any) -> Callable[[], None]:
        slot.append(decider)
        return lambda: slot.remove(decider) if decider in slot else None

    def set_write_intent(
        self, decider: Callable[[str | None, str], WriteCondition]
    ) -> Callable[[], None]:
        """Register a write-intent decider; the first registered one decides."""
        return self._slot(self._write_deciders, decider)

    def set_edit_intent(
        self, decider: Callable[[str | None, str], WriteCondition]
    ) -> Callable[[], None]:
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


def read_before_edit(
    gate: FsGate, *, display: Callable[[str], str] = lambda key: key
) -> Callable[[], None]:
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
