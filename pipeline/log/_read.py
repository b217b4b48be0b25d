"""Reading a log file without opening it for writing (``load``)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import msgspec

from .._errors import LogCorruptError
from ..events import Event, decode_event
from ._format import check_log_path, log_format
from ._jsonl import decode_lines
from ._sqlite import read_events

__all__ = ["load", "torn_tail"]


def load(path: str | os.PathLike[str]) -> list[Event]:
    """Every event of a JSONL or SQLite log file, in order, read-only: no lock is taken and
    no crash repair is written, so a log another process is still writing can be read (a
    torn last JSONL line, a write in progress, is left out).

    Raises:
        IsADirectoryError, LogError: the path is a directory, or another file that is not a
            regular one (``check_log_path``).
        ValueError: the suffix is neither ``.jsonl`` nor ``.db``/``.sqlite``/``.sqlite3``.
        FileNotFoundError: no such file.
        LogCorruptError: a line or row that is not an event (names the file and position),
            or an SQLite file that cannot be read as a log (``read_events``).

    An SQLite file left with a hot journal (its writer was killed mid-append) is read as
    it stands once the journal is rolled back: in a private copy, the file itself is not
    written.
    """
    file = Path(path)
    kind = check_log_path(file)
    if not file.exists():
        raise FileNotFoundError(f"no such file: {file}")
    if kind == "jsonl":         # no newline yet at its end: torn, or being written
        return decode_lines(str(file), file.read_bytes().split(b"\n"), torn_tail=True)
    try:
        return _read_sqlite(file, f"{file.resolve().as_uri()}?mode=ro")
    except LogCorruptError as exc:
        journal = file.with_name(file.name + "-journal")
        if not (_is_readonly(exc.__cause__) and journal.is_file()):
            raise
    # A hot journal (a writer died mid-append): rolling it back takes a write, which a
    # read-only reader may not make. The copy is rolled back instead; the file itself is
    # left to the next writer, which rolls it back the same way.
    with tempfile.TemporaryDirectory(prefix="codemode-log-") as scratch:
        copy = Path(scratch) / file.name
        shutil.copyfile(file, copy)
        shutil.copyfile(journal, copy.with_name(journal.name))
        return _read_sqlite(copy, str(copy), shown=str(file))


def torn_tail(path: str | os.PathLike[str]) -> int:
    """The size in bytes of a torn last line of a JSONL log (one with no newline that is not
    an event: a write in progress, or a writer that died mid-append), which ``load`` leaves
    out and opening the log for writing drops; 0 when there is none or for an SQLite log.

    Raises:
        ValueError: not a log file's suffix (``log_format``).
        FileNotFoundError: no such file."""
    file = Path(path)
    if log_format(file) != "jsonl":
        return 0
    tail = file.read_bytes().rpartition(b"\n")[2]
    if not tail.strip():
        return 0
    try:
        decode_event(tail)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return len(tail)
    return 0


def _read_sqlite(file: Path, target: str, *, shown: str | None = None) -> list[Event]:
    """The events of the SQLite database at `target` (a path, or a URI naming `file`)."""
    name = shown or str(file)
    try:
        db = sqlite3.connect(target, uri=target.startswith("file:"))
    except sqlite3.Error as exc:
        raise LogCorruptError(name, 0, str(exc), unit="row") from exc
    try:
        return read_events(db, name)
    finally:
        db.close()


def _is_readonly(exc: BaseException | None) -> bool:
    """SQLite said it needed a write (SQLITE_READONLY and its extended codes)."""
    return isinstance(exc, sqlite3.Error) and (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == 8
