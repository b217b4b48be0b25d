"""Waiting on a sandbox run from the event loop: the runs run on a thread (the tier's own,
or `run_waiters`), and the loop is woken once when one ends."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from typing import Any


# Threads that wait on sandbox runs. Not asyncio's default executor: sync tool bodies run
# there, and a run that holds one of its threads while its sub-call waits for another
# deadlocks once enough runs are in flight (8 concurrent runs on 2 cores did). More runs
# than threads queue here; they never block the sub-calls of the runs in progress. Made on
# first use: a sandbox with `submit` (the wasm tier) never needs it.
@functools.cache
def run_waiters() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max_workers=64,
                                                 thread_name_prefix="codemode-run-call")


def ended(running: concurrent.futures.Future[Any],
          loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
    """A future of `loop` resolved once `running` (a run on its runner thread) is done:
    one wake of the loop, scheduled by the runner thread, where `asyncio.wrap_future` and
    `asyncio.shield` take three turns. Cancelling it leaves the run going."""
    done = loop.create_future()

    def resolve() -> None:
        if not done.done():
            done.set_result(None)

    def wake(_done: object) -> None:
        try:
            loop.call_soon_threadsafe(resolve)
        except RuntimeError:          # the loop is closed: nobody waits any more
            pass

    running.add_done_callback(wake)
    return done
