"""Reference ``tools/execute`` wrappers: timeout and retry (docs/pipeline-spec.md S8).

Register with ``session.on("tools/execute", timeout_wrapper)``; registration order decides
composition (a timeout registered before a retry bounds all attempts together; registered
after it, each attempt).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ._deadline import timeout_message
from ._errors import OutcomeUnknownError, ToolTimeoutError
from ._execution import DispatchExecution
from ._normalize import failure_from
from ._result import CallResult
from ._signal import Signal

__all__ = ["RETRY_NEVER_CODES", "retry_wrapper", "timeout_wrapper"]

Next = Callable[[], Awaitable[CallResult]]
UNKNOWN = OutcomeUnknownError.code


async def timeout_wrapper(execution: DispatchExecution, next: Next) -> CallResult:
    """Bound everything inside it (a retry's attempts together) by the tool's ``timeout_ms``.

    The pipeline enforces ``timeout_ms`` around each run of the body by itself (``_deadline``):
    this wrapper is only for bounding what other wrappers do around it. Installs a signal
    that fires on the caller's abort or the deadline, calls ``next()``, restores the
    previous signal, and if its own deadline fired replaces whatever came back with
    ``TOOL_TIMEOUT`` ("tool call timed out after <ms>ms"), except a ``TOOL_OUTCOME_UNKNOWN``
    (a body that could not be stopped), which is kept. Tools without a budget pass through
    untouched.
    """
    definition = execution.definition
    budget = definition.timeout_ms if definition is not None else None
    if not budget:
        return await next()
    message = timeout_message(budget)
    deadline = Signal()
    timer = asyncio.get_running_loop().call_later(
        budget / 1000, deadline.abort, ToolTimeoutError(message)
    )
    previous = execution.signal
    installed = Signal.any(previous, deadline)
    execution.signal = installed
    try:
        result = await next()
    finally:
        execution.signal = previous
        timer.cancel()
        installed.detach()
    if deadline.aborted and result.error is not None and result.error.code == UNKNOWN:
        return result
    if deadline.aborted:
        return failure_from(ToolTimeoutError(message))
    return result


#: failure codes a retry never repeats (they would fail the same way, or must not repeat)
RETRY_NEVER_CODES = frozenset(
    {
        "ABORTED",
        "ABORTED_BEFORE_DISPATCH",
        "UNKNOWN_TOOL",
        "INVALID_ARGS",
        "INVALID_TOOL_OUTPUT",
        "TOOL_TIMEOUT",
        "TOOL_OUTCOME_UNKNOWN",     # it may have taken effect: never run it again
    }
)


def _default_should_retry(result: CallResult) -> bool:
    if not result.is_error or result.error is None:
        return False
    code = result.error.code
    return code is None or code not in RETRY_NEVER_CODES


def retry_wrapper(
    *,
    max_attempts: int = 3,
    backoff_ms: float = 0.0,
    should_retry: Callable[[CallResult], bool] = _default_should_retry,
    applies: Callable[[Any], bool] = lambda execution: True,
) -> Callable[[DispatchExecution, Next], Awaitable[CallResult]]:
    """A wrapper that re-runs ``next()`` while ``should_retry(result)`` and attempts remain.

    Stops at once when the execution's signal is aborted (no further backend attempts);
    waits ``backoff_ms * attempt`` between attempts, interruptibly. ``applies(execution)``
    selects the calls it handles (default: all). The default ``should_retry`` repeats
    failures without a code or with a code outside ``RETRY_NEVER_CODES``.
    """
    if max_attempts < 1:
        raise ValueError("max_attempts must be >= 1")

    async def retry(execution: DispatchExecution, next: Next) -> CallResult:
        if not applies(execution):
            return await next()
        attempt = 1
        while True:
            result = await next()
            if attempt >= max_attempts or execution.signal.aborted or not should_retry(result):
                return result
            if backoff_ms > 0:
                waiter = asyncio.ensure_future(execution.signal.wait())
                try:
                    await asyncio.wait({waiter}, timeout=backoff_ms * attempt / 1000)
                finally:
                    waiter.cancel()
                if execution.signal.aborted:
                    return result
            attempt += 1

    return retry
