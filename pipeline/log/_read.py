"""Reading a log file without opening it for writing (``load``)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import msgspec

from .._errors import LogCorruptError
from ..events import Event, decode_event

__all__ = ["load"]


def load(path: str | os.PathLike[str]) -> list[Event]:
    """Every event of a JSONL or SQLite log file, in order, read-only: no lock is taken and
    no crash repair is written, so a log another process is still writing can be read (a
    torn last JSONL line, a write in progress, is left out).

    Raises:
        ValueError: the suffix is neither ``.jsonl`` nor ``.db``/``.sqlite``/``.sqlite3``.
        FileNotFoundError: no such file.
        LogCorruptError: a line or row that is not an event (names the file and position),
            or a file that is not an SQLite database.
    """
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix == ".jsonl":
        lines = file.read_bytes().split(b"\n")
        found: list[Event] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                found.append(decode_event(line))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                if number == len(lines):  # no newline yet: torn, or being written
                    break
                raise LogCorruptError(str(file), number, str(exc), unit="line") from exc
        return found
    if suffix in (".db", ".sqlite", ".sqlite3"):
        if not file.is_file():
            raise FileNotFoundError(f"no such file: {file}")
        try:
            db = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise LogCorruptError(str(file), 0, str(exc), unit="row") from exc
        try:
            rows = db.execute("SELECT seq, body FROM events ORDER BY seq").fetchall()
        except sqlite3.Error as exc:
            raise LogCorruptError(str(file), 0, str(exc), unit="row") from exc
        finally:
            db.close()
        events: list[Event] = []
        for seq, body in rows:
            try:
                events.append(decode_event(body))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise LogCorruptError(str(file), seq, str(exc), unit="row") from exc
        return events
    raise ValueError(f"unknown session log type {str(file)!r}: use .db/.sqlite (SQLite) or .jsonl")
