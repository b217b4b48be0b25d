"""Append-only session logs (docs/design.md §6, docs/pipeline-spec.md §10).

``open_log(path)`` picks the backend from the path: ``None`` -> in memory, ``.db``/
``.sqlite``/``.sqlite3`` -> SQLite (the embedded default), ``.jsonl`` -> JSON Lines
(``log_format(path)`` says which, or raises ``ValueError``).
Opening an existing log repairs it after a crash (every dangling ``tool/call`` and
sub-call gets a ``TOOL_OUTCOME_UNKNOWN`` outcome; open steps/turns are closed). Appends that
would break the log's invariants are refused (``LogInvariantError``); ``check(events)``
reports every violation of a whole log, and ``load(path)`` reads a log file without
opening it for writing.

The file backends (``SqliteLog``, ``JsonlLog``) and ``load`` load on first use (PEP 562), so a
session kept in memory never imports ``sqlite3``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .._lazy import lazy_exports as _lazy_exports
from ._base import AppendOnlyLog, SessionLog
from ._check import REFUSED, LogChecker, Violation, ViolationKind, check
from ._format import check_log_path, log_format
from ._lock import lock_file
from ._memory import MemoryLog
from ._recovery import OUTCOME_UNKNOWN_MESSAGE, repair_events

if TYPE_CHECKING:  # `X as X`: re-exported for type checkers, which do not run __getattr__
    from ._jsonl import JsonlLog as JsonlLog
    from ._read import load as load
    from ._read import torn_tail as torn_tail
    from ._sqlite import SqliteLog as SqliteLog

# name -> the private module that defines it
_LAZY = {"JsonlLog": "._jsonl", "SqliteLog": "._sqlite", "load": "._read",
         "torn_tail": "._read"}

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
    "check_log_path",
    "load",
    "lock_file",
    "log_format",
    "open_log",
    "repair_events",
    "torn_tail",
]


def open_log(path: str | os.PathLike[str] | SessionLog | None) -> SessionLog:
    """Open (or create) the log for ``path``; a ``SessionLog`` instance is returned as is.

    Raises:
        ValueError: unknown file suffix.
        IsADirectoryError, LogError: the path is a directory, or another file that is not
            a regular one (``check_log_path``: a FIFO would block for good).
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
    if check_log_path(text) == "sqlite":
        from ._sqlite import SqliteLog
        return SqliteLog(text)
    from ._jsonl import JsonlLog
    return JsonlLog(text)


__getattr__, __dir__ = _lazy_exports(__name__, globals(), _LAZY, __all__)
