"""Which backend a log file's name asks for: the one rule `open_log`, `load` and callers
that check a path up front (a command line's `--log`) share."""

from __future__ import annotations

import os
from typing import Literal

__all__ = ["log_format"]

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
