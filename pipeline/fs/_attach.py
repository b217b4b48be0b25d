"""The one ``FsGate`` of a session (docs/pipeline-spec.md §9: state per agent session, shared by all
calls of the session, Code-Mode sub-calls included)."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from .._fs_guard import FsGate, read_before_edit
from ._store import WorkspaceStore

if TYPE_CHECKING:
    from .._session import Session

__all__ = ["attach_store", "session_gate"]


class _Attached:
    """A session's gate and the stores whose keys it shows root-relative in messages."""

    def __init__(self, session: Session) -> None:
        self.stores: list[WorkspaceStore] = []
        self.gate = FsGate(session.log.append)
        self.dispose = read_before_edit(self.gate, display=self.display)

    def display(self, key: str) -> str:
        for store in self.stores:
            if store.workspace.contains(key):
                return store.display(key)
        return key


_ATTACHED: weakref.WeakKeyDictionary[Any, _Attached] = weakref.WeakKeyDictionary()


def _attached(session: Session) -> _Attached:
    attached = _ATTACHED.get(session)
    if attached is None:
        attached = _ATTACHED[session] = _Attached(session)
    return attached


def session_gate(session: Session) -> FsGate:
    """The ``FsGate`` of ``session``: created on first use with the ``read_before_edit``
    policy installed, logging ``fs/observed`` to ``session.log``; lives as long as the
    session. ``gate.clear()`` forgets every observation."""
    return _attached(session).gate


def attach_store(session: Session, store: WorkspaceStore) -> FsGate:
    """Show ``store``'s keys root-relative in the session gate's messages; return the gate."""
    attached = _attached(session)
    if store not in attached.stores:
        attached.stores.append(store)
    return attached.gate
