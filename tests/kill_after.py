"""Run a program and SIGKILL it right after its session log appends a chosen event: the
deterministic kill -9 of the crash tests (no timing involved).

    python -m tests.kill_after TYPE N -m codemode ARGS...   # the CLI
    python -m tests.kill_after TYPE N SCRIPT.py ARGS...      # any program using a log

The process kills itself once the `N`-th event of type `TYPE` (`"tool/resumed"`, ...; `*`
counts every event) is written (committed, for SQLite; flushed, for JSONL) by any log it
opens, before anything else happens; with fewer such events it runs to its end. Exit
status: that of the program, or -9 (SIGKILL) for a subprocess' caller.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from typing import Any

from codemode.pipeline.events import Event
from codemode.pipeline.log import AppendOnlyLog


def install(tag: str, nth: int) -> None:
    """Make every log kill the process after its `nth` append of a `tag` event."""
    original = AppendOnlyLog._append
    seen = 0

    def append(self: AppendOnlyLog, event: Event, *, refuse: bool) -> Any:
        nonlocal seen
        stamped = original(self, event, refuse=refuse)
        if tag in ("*", type(stamped).__struct_config__.tag):
            seen += 1
            if seen == nth:
                os.kill(os.getpid(), signal.SIGKILL)
        return stamped

    AppendOnlyLog._append = append  # type: ignore[method-assign]


def main() -> None:
    tag, nth, *rest = sys.argv[1:]
    install(tag, int(nth))
    if rest[:1] == ["-m"]:
        sys.argv = [rest[1], *rest[2:]]
        runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = rest
        runpy.run_path(rest[0], run_name="__main__")


if __name__ == "__main__":
    main()
