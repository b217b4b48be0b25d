"""A clean stop on SIGTERM and SIGHUP, as on Ctrl-C (what `codemode` commands run under).

SIGTERM is what Docker, systemd and `Popen.terminate()` send, SIGHUP what a closing terminal
sends; by default either kills the process where it stands, leaving a turn open in the log and
its `.lock` file behind. Under `stopping()`, each is turned into the SIGINT path instead:
`asyncio.run` cancels its main task, so every `async with` unwinds — sub-calls in flight are
aborted and committed (outcome unknown when they do not stop), the turn closes, the log is
closed and its lock removed — and outside an event loop `KeyboardInterrupt` unwinds the same
way. The command then exits with `128 + signum` (143 for SIGTERM, 129 for SIGHUP, 130 for
SIGINT), the shell's convention for "stopped by a signal", after one line on stderr.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["STOP_SIGNALS", "Stopped", "stopping"]

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                     if hasattr(signal, name))


class Stopped:
    """Which signal stopped the command (`signum`), once one did."""

    def __init__(self) -> None:
        self.signum: int | None = None

    @property
    def exit_status(self) -> int:
        """`128 + signum`: how a shell reports a process a signal ended."""
        return 128 + (self.signum or signal.SIGINT)


@contextmanager
def stopping() -> Iterator[Stopped]:
    """Within: SIGTERM and SIGHUP stop like SIGINT (see the module docstring); the previous
    handlers are restored on exit. Main thread only (where Python runs signal handlers)."""
    stopped = Stopped()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stopped.signum is None:
            stopped.signum = signum
        signal.raise_signal(signal.SIGINT)   # the graceful path asyncio and Python provide

    previous = {}
    for signum in STOP_SIGNALS:
        previous[signum] = signal.signal(signum, on_signal)
    try:
        yield stopped
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def report_stop(stopped: Stopped) -> int:
    """One line on stderr naming the signal; the exit status to use."""
    name = signal.Signals(stopped.signum or signal.SIGINT).name
    sys.stderr.write(f"codemode: stopped by {name}\n")
    return stopped.exit_status
