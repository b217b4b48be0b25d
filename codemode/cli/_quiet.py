"""What dependencies print on stderr during a run, as one line each (`codemode run --json`),
and what host code prints on stdout, sent to stderr (`host_prints_to_stderr`).

The MCP SDK logs a traceback when a server sends a notification it cannot validate (a
progress token nobody asked for, a log level the protocol does not define), Python prints
warnings with their source line: under `--json` stderr is promised to stay empty, and without
it 28 lines of traceback hide the one fact they carry. Within `collected()`, every log record
of WARNING and up (any logger) and every Python warning becomes one line — the logger and the
message's first line, the exception's class, no traceback — listed once however often it
repeats; the caller puts the lines in the report's `warnings` or prints them.
"""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from typing import Any

__all__ = ["collected", "host_prints_to_stderr"]


class _Lines(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage().strip().splitlines()[0] if record.msg else ""
        except Exception:
            text = str(record.msg)
        if record.exc_info and record.exc_info[0] is not None:
            text += f" ({record.exc_info[0].__name__})"
        add(self.lines, f"{record.name}: {text}")


def add(lines: list[str], line: str) -> None:
    """Append `line` unless it is there already."""
    if line not in lines:
        lines.append(line)


@contextmanager
def collected() -> Iterator[list[str]]:
    """The warning lines of what ran inside (see the module docstring)."""
    lines: list[str] = []
    handler = _Lines(lines)
    root = logging.getLogger()
    root.addHandler(handler)
    shown = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        add(lines, str(message))

    warnings.showwarning = show
    try:
        yield lines
    finally:
        warnings.showwarning = shown
        root.removeHandler(handler)


@contextmanager
def host_prints_to_stderr() -> Iterator[None]:
    """While open, `print()` and `sys.stdout` writes of host code the command runs (your
    `--tools` module as it is imported, your tools as they run, libraries) go to stderr:
    a command's stdout holds only what it writes itself (the program's output, `--json`'s
    report, the plan), which a pipe may be parsing. The command's own writers made before
    (`Echo`) keep the stdout they were given. Python-level only: a C library writing to
    file descriptor 1 is not caught (`codemode serve` diverts the descriptor itself, as the
    MCP SDK's stdio transport does)."""
    with redirect_stdout(sys.stderr):
        yield
