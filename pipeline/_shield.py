"""The cancellation of the task awaiting a call: ``shielded`` lets the call settle anyway,
``own_cancellation`` tells that cancellation from anything a body, wrapper or listener throws.

Separate from the registry: the session's batches and resumptions await their work the same
way, and every phase of a pending call makes the same test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from ._eager import Stage
from ._errors import AbortedError
from ._signal import Signal

__all__ = ["own_cancellation", "shielded"]


def own_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is the cancellation of the task running the pipeline, the only thing
    a stage lets through; anything else a body, wrapper or listener throws is a result."""
    if not isinstance(exc, asyncio.CancelledError):
        return False
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def shielded(coro: Coroutine[Any, Any, Any], cancel: Signal) -> Any:
    """Await ``coro`` to completion even if the awaiting task is cancelled: cancellation
    aborts ``cancel`` instead, and ``CancelledError`` is re-raised after settling.
    ``coro``'s first step runs now (``Stage``)."""
    stage = Stage(coro)
    task = stage.task
    if task is None:               # it completed at once
        return await stage.outcome()
    cancelled = False
    while True:
        try:
            result = await stage.outcome()
            break
        except asyncio.CancelledError:
            if task.done():
                if task.cancelled():
                    raise
                result = task.result()
                cancelled = True
                break
            cancelled = True
            cancel.abort(AbortedError("the calling task was cancelled"))
    if cancelled:
        raise asyncio.CancelledError
    return result
