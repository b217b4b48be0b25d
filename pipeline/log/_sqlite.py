"""``SqliteLog``: the embedded default backend (stdlib ``sqlite3``)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import msgspec

from .._errors import LogCorruptError
from ..events import Event, decode_event, encode_event
from ._base import AppendOnlyLog
from ._lock import WriterLock

__all__ = ["SqliteLog"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq  INTEGER PRIMARY KEY,   -- the event's seq
    type TEXT NOT NULL,         -- the event's tag, for ad-hoc queries
    time REAL NOT NULL,         -- Unix seconds
    body TEXT NOT NULL          -- the whole event as JSON
)
"""


class SqliteLog(AppendOnlyLog):
    """One row per event in table ``events``; each append is its own committed transaction.

    An undecodable row raises ``LogCorruptError`` naming the file and the row's ``seq``; a file
    that is not an SQLite database raises it with position 0.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = str(path)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._writer = WriterLock(self.path)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            self._db.execute(_SCHEMA)
            self._open()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            self._writer.release()
            raise LogCorruptError(self.path, 0, str(exc), unit="row") from exc
        except BaseException:
            self._db.close()
            self._writer.release()
            raise

    def _load(self) -> list[Event]:
        events: list[Event] = []
        for seq, body in self._db.execute("SELECT seq, body FROM events ORDER BY seq"):
            try:
                event = decode_event(body)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise LogCorruptError(self.path or "", seq, str(exc), unit="row") from exc
            events.append(event)
        return events

    def _write(self, event: Event) -> None:
        body = encode_event(event).decode()
        self._db.execute(
            "INSERT INTO events (seq, type, time, body) VALUES (?, ?, ?, ?)",
            (event.seq, type(event).__struct_config__.tag, event.time, body),
        )

    def _close(self) -> None:
        self._db.close()
        self._writer.release()
