"""A clean stop on SIGTERM and SIGHUP, as on Ctrl-C, whatever SIGINT's disposition (what
`codemode` commands run under).

SIGTERM is what Docker, systemd, `kill` and `Popen.terminate()` send, SIGHUP what a closing
terminal sends; by default either kills the process where it stands, leaving a turn open in
the log and its `.lock` file behind. Under `stopping()` each is handled directly (never by
way of SIGINT, which a shell ignores in the commands a script starts with `cmd &`):

- in an event loop run by `run()`, the loop's handler cancels the command's main task, as
  asyncio does for Ctrl-C: every `async with` unwinds — sub-calls in flight are aborted and
  committed (outcome unknown when they do not stop), the turn closes, the log is closed and
  its lock removed — and `run()` raises `KeyboardInterrupt`;
- anywhere else (eval waiting on its job slots, a command starting up) the handler raises
  `KeyboardInterrupt`, which unwinds the same way (eval's slots kill their workers).

A second stop signal while the first one's clean-up runs raises `KeyboardInterrupt` at once,
as a second Ctrl-C does. SIGINT itself is left as it is: Python's `KeyboardInterrupt` when the
process got it as the default, still ignored when the parent ignored it. `_Group` (in
`_help.py`) turns the `KeyboardInterrupt` of any command into `report_stop`: one line on
stderr, `codemode: stopped by SIGTERM`, and the exit status `128 + signum` (143 for
SIGTERM, 129 for SIGHUP, 130 for SIGINT), the shell's convention for "stopped by a signal".
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:   # asyncio loads with the command that runs a loop, not with `--help`
    import asyncio

__all__ = ["STOP_SIGNALS", "Stopped", "report_stop", "run", "still_running", "stopping"]

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                     if hasattr(signal, name))

T = TypeVar("T")


class Stopped:
    """Which signal stopped the command (`signum`), once one did."""

    def __init__(self) -> None:
        self.signum: int | None = None

    @property
    def exit_status(self) -> int:
        """`128 + signum`: how a shell reports a process a signal ended."""
        return 128 + (self.signum or signal.SIGINT)

    def note(self, signum: int) -> bool:
        """Record `signum`; True for the first stop signal, False for a later one."""
        if self.signum is None:
            self.signum = signum
            return True
        return False


_current = Stopped()   # the signal that stopped this process's command (under `stopping`)


def current() -> Stopped:
    """What stopped the running command (a `Stopped` whose `signum` is None until then)."""
    return _current


@contextmanager
def stopping() -> Iterator[Stopped]:
    """Within: SIGTERM and SIGHUP raise `KeyboardInterrupt` (and `run()` turns them into a
    clean cancellation); the previous handlers are restored on exit. Main thread only
    (where Python runs signal handlers)."""
    global _current
    stopped = _current = Stopped()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopped.note(signum)
        raise KeyboardInterrupt

    previous = {}
    for signum in STOP_SIGNALS:
        previous[signum] = signal.signal(signum, on_signal)
    try:
        yield stopped
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)`, with SIGTERM and SIGHUP cancelling `main`'s task (see the module
    docstring) whatever SIGINT's disposition; Ctrl-C stays asyncio's own.

    Returns:
        What `main` returned.
    Raises:
        KeyboardInterrupt: a stop signal (or Ctrl-C) stopped it, after `main` unwound.
        Whatever `main` raised.
    """
    import asyncio

    stopped = _current
    task: asyncio.Task[Any] | None = None

    async def main_task() -> T:
        nonlocal task
        task = asyncio.current_task()
        return await main

    def on_signal(signum: int) -> None:
        if not stopped.note(signum):
            raise KeyboardInterrupt            # a second one: stop now, as a second Ctrl-C
        if task is not None and not task.done():
            task.cancel()

    with asyncio.Runner() as runner:
        loop = runner.get_loop()
        loop.set_default_executor(_tool_threads())
        handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
        installed = []
        for signum in STOP_SIGNALS:
            try:
                loop.add_signal_handler(signum, on_signal, signum)
            except (NotImplementedError, RuntimeError, ValueError):   # not here: the plain one
                continue
            installed.append(signum)
        try:
            result = runner.run(main_task())
        except asyncio.CancelledError:
            if stopped.signum is None:
                raise
            raise KeyboardInterrupt from None
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)
                signal.signal(signum, handlers[signum])   # removing set SIG_DFL
    if stopped.signum is not None:     # it came as `main` was returning: still a stop
        raise KeyboardInterrupt
    return result


def report_stop(stopped: Stopped | None = None) -> int:
    """One line on stderr naming the signal; the exit status to use."""
    stopped = stopped or _current
    name = signal.Signals(stopped.signum or signal.SIGINT).name
    sys.stderr.write(f"codemode: stopped by {name}\n")
    return stopped.exit_status


# Synchronous tools run in the loop's default executor (`asyncio.to_thread`). A tool that
# does not return when its run ends (stuck in `time.sleep`, a blocking read) cannot be
# stopped: Python has no way to kill a thread. The run is abandoned at its limit; these
# threads let the command end then too, instead of at the tool's own end.
_pools: list[Any] = []


def _tool_threads() -> Any:
    """The loop's default executor: closing the loop does not wait for a call still
    running in it (`still_running` counts them)."""
    import concurrent.futures
    import threading

    class ToolThreads(concurrent.futures.ThreadPoolExecutor):
        def __init__(self) -> None:
            super().__init__(thread_name_prefix="codemode-tool")
            self.busy = 0
            self._count = threading.Lock()

        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            with self._count:
                self.busy += 1
            try:
                future = super().submit(fn, *args, **kwargs)
            except BaseException:
                self._done(None)
                raise
            future.add_done_callback(self._done)
            return future

        def _done(self, _future: Any) -> None:
            with self._count:
                self.busy -= 1

        def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
            super().shutdown(wait=False, cancel_futures=True)
            if not self.busy and self in _pools:      # kept only while a call runs on
                _pools.remove(self)

    pool = ToolThreads()
    _pools.append(pool)
    return pool


def still_running() -> int:
    """How many tool calls of this process's loops are still running in a thread."""
    return sum(pool.busy for pool in _pools)
