"""The ``SessionLog`` protocol and the shared append-only machinery (docs/design.md §6)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import msgspec

from .._errors import LogClosedError, LogCorruptError, LogInvariantError
from ..events import Event
from ._check import REFUSED, LogChecker
from ._recovery import repair_events

__all__ = ["AppendOnlyLog", "SessionLog"]

_EVENT_CLASSES: set[type] = set()     # classes of events appended so far


@runtime_checkable
class SessionLog(Protocol):
    """An append-only sequence of session events.

    ``append`` stamps ``seq`` (1, 2, ... in append order) and ``time`` (Unix seconds) and
    returns the stamped event; it is thread-safe. ``read`` returns every event in order.
    Backends: ``MemoryLog`` (``log=None``), ``SqliteLog`` (``.db``/``.sqlite``, the embedded
    default) and ``JsonlLog`` (``.jsonl``, the interchange format).
    """

    path: str | None

    def append(self, event: Event) -> Event: ...

    def read(self) -> list[Event]: ...

    def close(self) -> None: ...

    def __enter__(self) -> SessionLog: ...

    def __exit__(self, *exc: object) -> None: ...


class AppendOnlyLog:
    """Base for the backends: locking, seq/time stamping, closing, crash repair on open.

    Subclasses implement ``_load() -> list[Event]`` (read everything stored, raising
    ``LogCorruptError``), ``_write(event)`` (persist one stamped event) and ``_close()``.

    Every append is checked against the log's invariants (``LogChecker``); the ones in
    ``REFUSED`` (a result for a call nobody made, a dispatch event outside a turn, an empty
    id, ...) raise ``LogInvariantError`` and nothing is written. The others are left to
    ``check`` (a log may be checked while it is still being written).
    """

    path: str | None = None

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._closed = False
        self._seq = 0
        self._checker = LogChecker()
        #: events appended on open by crash repair (docs/pipeline-spec.md §10); empty for a
        #: clean log
        self.repaired: list[Event] = []
        self._watchers: list[Callable[[Event], None]] = []

    def _open(self) -> None:
        existing = self._load()
        for position, event in enumerate(existing, start=1):
            if event.seq != position:    # appends number on from the last: they would clash
                raise LogCorruptError(self.path or "<memory>", position,
                                      f"seq {event.seq} where seq {position} belongs: the log "
                                      "is out of order and cannot be appended to",
                                      unit="event")
        self._seq = len(existing)
        for event in existing:     # what is stored is taken as it is, violations included
            self._checker.apply(event)
        for event in repair_events(existing):
            self.repaired.append(self._append(event, refuse=False))

    # -- backend hooks ---------------------------------------------------------------
    def _load(self) -> list[Event]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _write(self, event: Event) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _close(self) -> None:
        pass

    # -- public API --------------------------------------------------------------------
    def append(self, event: Event) -> Event:
        """Stamp ``seq`` and ``time``, persist, return the stamped event.

        Raises:
            LogClosedError: the log was closed.
            LogInvariantError: the event would break an invariant the log refuses to break
                (``REFUSED``); nothing is written.
            TypeError: ``event`` is not a session event.
        """
        return self._append(event, refuse=True)

    def _append(self, event: Event, *, refuse: bool) -> Event:
        kind = type(event)     # (isinstance is slow for a Struct class: each class once)
        if kind not in _EVENT_CLASSES:
            if not isinstance(event, Event):
                raise TypeError(f"not a session event: {event!r}")
            _EVENT_CLASSES.add(kind)
        with self._lock:
            if self._closed:
                raise LogClosedError(f"session log {self.path or '<memory>'} is closed")
            stamped = msgspec.structs.replace(event, seq=self._seq + 1, time=time.time())
            if refuse:
                for violation in self._checker.violations(stamped):
                    if violation.kind in REFUSED:
                        raise LogInvariantError(
                            violation,
                            f"session log {self.path or '<memory>'} refuses a "
                            f"{type(stamped).__struct_config__.tag} event: {violation.message}")
            self._write(stamped)
            self._checker.apply(stamped)
            self._seq += 1
            for watcher in self._watchers:
                watcher(stamped)
            return stamped

    def read(self) -> list[Event]:
        """Every event in append order (re-read from storage)."""
        with self._lock:
            if self._closed:
                raise LogClosedError(f"session log {self.path or '<memory>'} is closed")
            return self._load()

    def watch(self, watcher: Callable[[Event], None]) -> None:
        """Call ``watcher(event)`` with every event stored so far, then with each event
        appended from now on, once it is stored: every event exactly once, in order, for a
        reader that keeps a running count instead of re-reading the log. Called under the
        log's lock: it must be quick, and must neither append nor raise.

        Raises:
            LogClosedError: the log was closed.
        """
        with self._lock:
            if self._closed:
                raise LogClosedError(f"session log {self.path or '<memory>'} is closed")
            for event in self._load():
                watcher(event)
            self._watchers.append(watcher)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close (idempotent). Later ``append``/``read`` raise ``LogClosedError``."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path or '<memory>'} seq={self._seq}>"
