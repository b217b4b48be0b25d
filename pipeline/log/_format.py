"""Which backend a log file's name asks for, and whether the path can be a log file at all:
the rules `open_log`, `load` and callers that check a path up front (a command line's
`--log`) share."""

from __future__ import annotations

import os
import stat
from typing import Literal

from .._errors import LogError

__all__ = ["check_log_path", "log_format"]

_FORMATS: dict[str, Literal["sqlite", "jsonl"]] = {
    ".db": "sqlite", ".sqlite": "sqlite", ".sqlite3": "sqlite", ".jsonl": "jsonl"}


def log_format(path: str | os.PathLike[str]) -> Literal["sqlite", "jsonl"]:
    """The backend of the log file at `path`, from its suffix (any case): `.db`,
    `.sqlite`, `.sqlite3` -> "sqlite" (the embedded default), `.jsonl` -> "jsonl".

    Raises:
        ValueError: any other suffix (the message names the path and the suffixes)."""
    text = os.fspath(path)
    found = _FORMATS.get(os.path.splitext(text)[1].lower())
    if found is None:
        raise ValueError(f"unknown session log type {text!r}: use .db/.sqlite (SQLite) "
                         "or .jsonl")
    return found


def check_log_path(path: str | os.PathLike[str]) -> Literal["sqlite", "jsonl"]:
    """`log_format(path)`, once the path is known to be a log file or none yet: opening a
    FIFO would wait for a writer for good, and a directory or a device is no log.

    Raises:
        IsADirectoryError: a directory (through a symbolic link too).
        LogError: something else that is not a regular file (a FIFO, a device, a socket).
        ValueError: an unknown suffix (`log_format`)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None                       # a new log, or a dangling symbolic link
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(f"{os.fspath(path)} is a directory, not a log file")
    if mode is not None and not stat.S_ISREG(mode):
        raise LogError(f"session log {os.fspath(path)} is not a regular file (a FIFO, a "
                       "device or a socket): a log is a file")
    return log_format(path)
