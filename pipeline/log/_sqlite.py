"""``SqliteLog``: the embedded default backend (stdlib ``sqlite3``)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import msgspec

from .._errors import LogCorruptError, LogError
from ..events import Event, decode_event, encode_event
from ._base import AppendOnlyLog
from ._lock import WriterLock

__all__ = ["SqliteLog", "read_events"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq  INTEGER PRIMARY KEY,   -- the event's seq
    type TEXT NOT NULL,         -- the event's tag, for ad-hoc queries
    time REAL NOT NULL,         -- Unix seconds
    body TEXT NOT NULL          -- the whole event as JSON
)
"""


_COLUMNS = ["seq", "type", "time", "body"]


def not_a_log(db: sqlite3.Connection) -> str | None:
    """Why the database is not a session log, or None: it is one, or it has no table or
    view yet (a new file, which opening makes one). Read before anything is written, so that a
    database of the user's own, given as a log by mistake, is left as it was.

    Raises:
        sqlite3.DatabaseError: the file is not an SQLite database."""
    kind = db.execute("SELECT type FROM sqlite_master WHERE name = 'events'").fetchone()
    if kind is not None and kind[0] != "table":         # nothing could be appended
        return f"'events' is a {kind[0]}, not a table"
    # every table and view, and what any index or trigger belongs to: a log has `events`
    found = {name for (name,) in db.execute(
        "SELECT tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")}
    if not found:
        return None
    others = sorted(found - {"events"})
    if others:
        return (f"not a session log: it holds tables or views other than 'events' "
                f"({', '.join(others)})")
    columns = [row[1] for row in db.execute("PRAGMA table_info(events)")]
    if columns != _COLUMNS:
        return (f"not a session log: its 'events' table has the columns "
                f"({', '.join(columns)}), not ({', '.join(_COLUMNS)})")
    return None


def read_events(db: sqlite3.Connection, path: str) -> list[Event]:
    """Every event of table ``events``, in ``seq`` order.

    Raises:
        LogCorruptError: the database is not a session log (``not_a_log``: ``events`` is
            a view, other tables, other columns), a row is not an event (its body is not
            JSON text, or not an event), a row's key is not the ``seq`` of the event it
            holds (the next append would collide with a stored key or land out of order),
            or SQLite cannot read the file (not a database, cut short, malformed);
            position 0 when no row is to blame.
    """
    try:
        problem = not_a_log(db)
        if problem is not None:
            raise LogCorruptError(path, 0, problem, unit="row")
        rows = db.execute("SELECT seq, body FROM events ORDER BY seq").fetchall()
    except sqlite3.Error as exc:
        raise LogCorruptError(path, 0, str(exc), unit="row") from exc
    events: list[Event] = []
    for seq, body in rows:
        try:
            event = decode_event(body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise LogCorruptError(path, seq, str(exc), unit="row") from exc
        if event.seq != seq:
            raise LogCorruptError(path, seq, f"the row holds the event of seq {event.seq}",
                                  unit="row")
        events.append(event)
    return events


# Write-ahead logging, synced at checkpoints: a commit is a write to `<file>-wal`, not
# three fsyncs of a rollback journal (~11 us an append instead of ~0.8 ms on this machine's
# disk, six appends per model call). A committed append survives the process being killed,
# as a flushed JSONL line does; a power cut may lose the last appends, never the file.
# (`synchronous = NORMAL` only with the write-ahead log: with a rollback journal it could.)
_WAL = "PRAGMA journal_mode = WAL"
_SYNC_AT_CHECKPOINTS = "PRAGMA synchronous = NORMAL"


class SqliteLog(AppendOnlyLog):
    """One row per event in table ``events``; each append is its own committed transaction.
    The file is put in write-ahead-log mode (`<file>-wal` and `<file>-shm` beside it while
    it is open), synced at checkpoints: an append survives the process being killed; a
    power cut may lose the last appends, never corrupt the file. A file that cannot take
    that mode (its directory read-only) keeps SQLite's rollback journal, synced per append.

    Reading raises ``LogCorruptError`` as ``read_events`` says (an undecodable row names the
    file and the row's ``seq``; a file that is not an SQLite database, or a database that is
    not a session log, ``not_a_log``, has position 0, and is left as it was). An
    append SQLite refuses (a full disk, a read-only file) raises ``LogError``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = str(path)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._writer = WriterLock(self.path)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            problem = not_a_log(self._db)      # before the schema and the journal mode
            if problem is not None:
                raise LogCorruptError(self.path, 0, problem, unit="row")
            self._db.execute(_SCHEMA)
            self._fast_commits()
            self._open()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            self._writer.release()
            raise LogCorruptError(self.path, 0, str(exc), unit="row") from exc
        except BaseException:
            self._db.close()
            self._writer.release()
            raise

    def _fast_commits(self) -> None:
        """Write-ahead logging synced at checkpoints, when the file takes it; otherwise
        (a read-only file or directory, a file system without shared memory) each commit
        stays fully synced through the rollback journal."""
        try:
            mode = self._db.execute(_WAL).fetchone()
            if mode is not None and str(mode[0]).lower() == "wal":
                self._db.execute(_SYNC_AT_CHECKPOINTS)
        except sqlite3.OperationalError:     # read-only: appends fail later, typed
            pass

    def _load(self) -> list[Event]:
        return read_events(self._db, self.path or "")

    def _write(self, event: Event) -> None:
        body = encode_event(event).decode()
        try:
            self._db.execute(
                "INSERT INTO events (seq, type, time, body) VALUES (?, ?, ?, ?)",
                (event.seq, type(event).__struct_config__.tag, event.time, body),
            )
        except sqlite3.Error as exc:
            raise LogError(f"session log {self.path} could not append seq {event.seq}: "
                           f"{exc}") from exc

    def _close(self) -> None:
        self._db.close()
        self._writer.release()
