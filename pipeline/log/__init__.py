"""Append-only session logs (docs/design.md §6, docs/pipeline-spec.md §10).

``open_log(path)`` picks the backend from the path: ``None`` -> in memory, ``.db``/
``.sqlite``/``.sqlite3`` -> SQLite (the embedded default), ``.jsonl`` -> JSON Lines.
Opening an existing log repairs it after a crash (every dangling ``tool/call`` and
sub-call gets a ``TOOL_OUTCOME_UNKNOWN`` outcome; open steps/turns are closed). Appends that
would break the log's invariants are refused (``LogInvariantError``); ``check(events)``
reports every violation of a whole log, and ``load(path)`` reads a log file without
opening it for writing.
"""

from __future__ import annotations

import os

from ._base import AppendOnlyLog, SessionLog
from ._check import REFUSED, LogChecker, Violation, ViolationKind, check
from ._jsonl import JsonlLog
from ._memory import MemoryLog
from ._read import load
from ._recovery import OUTCOME_UNKNOWN_MESSAGE, repair_events
from ._sqlite import SqliteLog

__all__ = [
    "OUTCOME_UNKNOWN_MESSAGE",
    "REFUSED",
    "AppendOnlyLog",
    "JsonlLog",
    "LogChecker",
    "MemoryLog",
    "SessionLog",
    "SqliteLog",
    "Violation",
    "ViolationKind",
    "check",
    "load",
    "open_log",
    "repair_events",
]


def open_log(path: str | os.PathLike[str] | SessionLog | None) -> SessionLog:
    """Open (or create) the log for ``path``; a ``SessionLog`` instance is returned as is.

    Raises:
        ValueError: unknown file suffix.
        LogCorruptError: a stored event cannot be decoded (names file and position), or
            the stored events are not numbered 1, 2, 3, ... (appends would clash).
    """
    if path is None:
        return MemoryLog()
    if isinstance(path, AppendOnlyLog) or (
        not isinstance(path, (str, os.PathLike)) and isinstance(path, SessionLog)
    ):
        return path
    text = os.fspath(path)
    suffix = os.path.splitext(text)[1].lower()
    if suffix in (".db", ".sqlite", ".sqlite3"):
        return SqliteLog(text)
    if suffix == ".jsonl":
        return JsonlLog(text)
    raise ValueError(f"unknown session log type {text!r}: use .db/.sqlite (SQLite) or .jsonl")
