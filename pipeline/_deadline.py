"""A tool's declared ``timeout_ms``, enforced around its body by the pipeline itself
(docs/pipeline.md "Timeouts"; S9 of docs/pipeline-spec.md §2).

The body runs as a task of its own (its first step at once, ``eager``) beside a timer. At
the deadline the body's signal is aborted with ``ToolTimeoutError``, then its task is
cancelled, so a body that ignores its signal stops at its next ``await``:

- the body ended (cancelled, or anything it raised on the way out): ``TOOL_TIMEOUT``;
- a sync ``@tool`` body still runs in its worker thread, which Python cannot interrupt:
  ``TOOL_OUTCOME_UNKNOWN`` at once, without waiting for the thread;
- an async body that swallowed the cancellation and goes on after ``CANCEL_GRACE_S``:
  ``TOOL_OUTCOME_UNKNOWN``.

In both unknown cases the call is answered then (its result committed and logged once), and
what the body does or returns later is dropped. A body that finishes within its budget is
untouched: its value or exception is the call's as without a budget.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from ._eager import eager
from ._errors import OutcomeUnknownError, ToolTimeoutError
from ._shield import own_cancellation
from ._signal import Signal

__all__ = ["CANCEL_GRACE_S", "thread_started", "timeout_message", "within_deadline"]

#: seconds a cancelled async body has to end before its outcome is reported unknown
CANCEL_GRACE_S = 1.0

# The worker threads the body being run under a deadline started (each one's end event).
_threads: contextvars.ContextVar[list[threading.Event] | None] = contextvars.ContextVar(
    "codemode_pipeline_body_threads", default=None)

# Bodies left running past their deadline: held until they end (a task nobody references
# may be collected mid-run), their outcome dropped.
_left_running: set[asyncio.Future[Any]] = set()


def timeout_message(budget_ms: float) -> str:
    """``"tool call timed out after 50ms"`` (an integral budget without ``.0``)."""
    ms = int(budget_ms) if float(budget_ms).is_integer() else budget_ms
    return f"tool call timed out after {ms}ms"


def thread_started() -> threading.Event | None:
    """For a body that hands its work to a worker thread: an event for the thread to set
    when it ends, watched by the deadline of the body being run; ``None`` when no deadline
    watches (the body has no budget)."""
    watched = _threads.get()
    if watched is None:
        return None
    ended = threading.Event()
    watched.append(ended)
    return ended


async def within_deadline(
    budget_ms: float, body: Callable[[], Coroutine[Any, Any, Any]], deadline: Signal
) -> Any:
    """Run ``body()`` for at most ``budget_ms`` milliseconds (module docstring).

    Args:
        budget_ms: the tool's ``timeout_ms`` (> 0).
        body: makes the coroutine that runs the tool's body and returns its value.
        deadline: aborted with ``ToolTimeoutError`` at the deadline, before the body's task
            is cancelled (the body's ``ctx.signal`` should include it).

    Returns:
        what the body returned within its budget.
    Raises:
        whatever the body raised within its budget; ``ToolTimeoutError`` (``TOOL_TIMEOUT``)
        when it ended at the deadline; ``OutcomeUnknownError`` (``TOOL_OUTCOME_UNKNOWN``)
        when it could not be stopped; ``CancelledError`` when the awaiting task is
        cancelled (the body is cancelled too, and awaited as it was when run inline).
    """
    threads: list[threading.Event] = []
    token = _threads.set(threads)
    try:
        task = eager(_captured(body()))      # the first step sees (and copies) `threads`
    finally:
        _threads.reset(token)
    if not task.done():
        try:
            await asyncio.wait({task}, timeout=budget_ms / 1000)
        except asyncio.CancelledError:
            task.cancel()
            await asyncio.wait({task})       # its own clean-up, as when run in this task
            raise
    if task.done():
        ok, outcome = task.result()
        if ok:
            return outcome
        raise outcome
    message = timeout_message(budget_ms)
    deadline.abort(ToolTimeoutError(message))
    task.cancel()
    if any(not ended.is_set() for ended in threads):
        _leave_running(task)
        raise OutcomeUnknownError(
            f"{message}; its body still runs in a worker thread, which cannot be stopped: "
            "whether it takes effect is unknown")
    await asyncio.wait({task}, timeout=CANCEL_GRACE_S)
    if not task.done():
        _leave_running(task)
        raise OutcomeUnknownError(
            f"{message}; its body did not stop when cancelled: whether it takes effect is "
            "unknown")
    if not task.cancelled():
        task.result()                        # retrieved: what it raised on the way out
    raise ToolTimeoutError(message)


async def _captured(running: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    """``(True, value)`` or ``(False, what the body raised)``: an exception handed back as
    a value is re-raised in the caller's frame (a ``GeneratorExit`` travelling through a
    future's ``await`` would escape every ``except`` above it). Only the cancellation of
    the body's task at its deadline propagates."""
    try:
        return True, await running
    except BaseException as exc:  # SystemExit from argparse included: a result
        if own_cancellation(exc):
            raise
        return False, exc


def _leave_running(task: asyncio.Future[Any]) -> None:
    _left_running.add(task)

    def forget(done: asyncio.Future[Any]) -> None:
        _left_running.discard(done)
        if not done.cancelled():
            done.exception()                 # retrieved: nobody waits for it any more

    task.add_done_callback(forget)
