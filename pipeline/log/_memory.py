"""``MemoryLog``: the in-process log used when a session has ``log=None``."""

from __future__ import annotations

from ..events import Event
from ._base import AppendOnlyLog

__all__ = ["MemoryLog"]


class MemoryLog(AppendOnlyLog):
    """Keeps events in a list; nothing survives the process."""

    def __init__(self) -> None:
        super().__init__()
        self._events: list[Event] = []
        self._open()

    def _load(self) -> list[Event]:
        return list(self._events)

    def _write(self, event: Event) -> None:
        self._events.append(event)
