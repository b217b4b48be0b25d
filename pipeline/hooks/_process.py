"""Running one hook executable without blocking the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal as signals
import time
from collections.abc import Sequence

import msgspec

from .._signal import Signal

__all__ = ["Aborted", "Completed", "TimedOut", "run_command"]

_DRAIN_AFTER_KILL_S = 1.0


class Completed(msgspec.Struct, frozen=True):
    """The process exited: ``exit_code`` (negative: killed by that signal number), its
    ``stdout``/``stderr`` bytes, ``duration_ms`` wall clock in milliseconds."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    duration_ms: float


class TimedOut(msgspec.Struct, frozen=True):
    """The process outlived its timeout and was killed (with its process group)."""

    duration_ms: float


class Aborted(msgspec.Struct, frozen=True):
    """The caller's signal fired first; the process was killed (with its process group)."""

    duration_ms: float


def _kill(process: asyncio.subprocess.Process) -> None:
    """SIGKILL the process group this hook leads (its own session), or the process."""
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError, AttributeError):
        os.killpg(process.pid, signals.SIGKILL)
        return
    with contextlib.suppress(ProcessLookupError):
        process.kill()


async def run_command(
    argv: Sequence[str], stdin: bytes, *, timeout_s: float, signal: Signal
) -> Completed | TimedOut | Aborted:
    """Run ``argv`` in a new session with ``stdin`` piped in; collect stdout and stderr.

    The process is killed (its whole process group) on timeout, on ``signal`` aborting, and
    if the awaiting task is cancelled; every path waits for it to be reaped.

    Raises:
        OSError: the executable could not be started (missing, not executable, ...).
    """
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    io = asyncio.ensure_future(process.communicate(stdin))
    abort = asyncio.ensure_future(signal.wait())
    try:
        done, _ = await asyncio.wait(
            {io, abort}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
        elapsed = (time.monotonic() - started) * 1000.0
        if io in done:
            out, err = io.result()
            assert process.returncode is not None
            return Completed(process.returncode, out, err, elapsed)
        _kill(process)
        return Aborted(elapsed) if abort in done else TimedOut(elapsed)
    finally:
        abort.cancel()
        _kill(process)
        if not io.done():
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(io), _DRAIN_AFTER_KILL_S)
            io.cancel()
        with contextlib.suppress(asyncio.TimeoutError, Exception):
            await asyncio.wait_for(process.wait(), _DRAIN_AFTER_KILL_S)
