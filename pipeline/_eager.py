"""Coroutines run as far as they go now, and waits that cost one turn of the event loop.

A task's step, a done callback and the awaiter's wake-up are each a turn of the loop (a
pass through its ready queue, ~8-30 us). ``eager`` runs a coroutine's first step at once;
``Stage`` also lets a caller wait for the rest without the second turn of
``asyncio.shield``, whose done callback resolves another future that then wakes the awaiter.
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any, Generic, TypeVar

__all__ = ["Stage", "begin", "eager", "launch"]

_T = TypeVar("_T")


def eager(coro: Coroutine[Any, Any, _T],
          loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Future[_T]:
    """``asyncio.ensure_future(coro)``, except that the coroutine's first step runs now,
    in a copy of the current context as a task's would: a stage with nothing to wait for
    (no listener, a body that does not await) completes here, without a task or a turn of
    the event loop (each costs more than such a stage's own work). If it suspends, the
    rest runs as a task of its own (in the same context), so cancelling the returned
    future reaches it as it would reach a task started with ``ensure_future``.

    Args:
        coro: the coroutine.
        loop: the running event loop, when the caller has it at hand (default: looked up,
            which costs CPython 3.11 a ``getpid`` system call).
    """
    if loop is None:
        loop = asyncio.get_running_loop()
    finished, value = _started(coro, loop)
    if finished:
        done: asyncio.Future[_T] = loop.create_future()
        done.set_result(value)
        return done
    return value  # type: ignore[no-any-return]


def launch(coro: Coroutine[Any, Any, Any],
           loop: asyncio.AbstractEventLoop) -> asyncio.Future[Any] | None:
    """``eager(coro, loop)`` for a coroutine whose result nobody reads: None when it
    returned in its first step (no future is made for it), else what ``eager`` returns
    (the task going on with it, or the failed future of what its first step raised)."""
    finished, value = _started(coro, loop)
    return None if finished else value


def _started(coro: Coroutine[Any, Any, Any],
             loop: asyncio.AbstractEventLoop) -> tuple[bool, Any]:
    """``coro``'s first step, run now: ``(True, what it returned)``, or ``(False, the task
    going on with it)``, or ``(False, a failed future)`` holding what the step raised."""
    try:
        context, finished, value = _first_step(coro)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        failed: asyncio.Future[Any] = loop.create_future()
        if isinstance(exc, asyncio.CancelledError):
            failed.cancel()
        else:
            failed.set_exception(exc)
        return False, failed
    if finished:
        return True, value
    return False, loop.create_task(_native(_go_on(coro, value)), context=context)


def _first_step(coro: Coroutine[Any, Any, Any]) -> tuple[contextvars.Context, bool, Any]:
    """``coro``'s first step, run now in a copy of the current context (as a task's
    would be): (that context, whether the coroutine finished, its result if it did, else
    what it suspended on). What the step raises propagates."""
    context = contextvars.copy_context()
    try:
        return context, False, context.run(coro.send, None)
    except StopIteration as stop:
        return context, True, stop.value


async def _native(steps: Awaitable[_T]) -> _T:
    """A native coroutine that awaits ``steps``, a generator-based one: since Python 3.12
    ``create_task`` takes only native coroutines (``asyncio.iscoroutine`` no longer
    accepts a ``@types.coroutine`` generator). The await delegates each step in C."""
    return await steps


@types.coroutine
def _go_on(coro: Coroutine[Any, Any, _T], yielded: Any) -> Generator[Any, Any, _T]:
    """The rest of ``coro``, which suspended on ``yielded``, as the body of a task: what
    the task sends or throws in goes on to the coroutine. A bare yield (``asyncio.sleep(0)``:
    resume at the loop's next turn) resumes in the task's first step, which is that turn
    (yielded to the task, it would cost one more)."""
    if yielded is None:
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
    while True:
        try:
            sent = yield yielded
        except BaseException as exc:
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]


class Stage(Generic[_T]):
    """A coroutine whose first step runs now, whose outcome
    ``outcome()`` awaits as ``asyncio.shield`` would: cancelling the awaiter leaves the
    stage running. One awaiter at a time: the stage wakes the future of the last
    ``outcome()`` that waits (the call's own task, in the pipeline).

    The stage's last step resolves the awaiter's own future itself, so the awaiter wakes
    one turn of the loop after the stage ends (through ``asyncio.shield``, a done callback
    first resolves another future, which then wakes the awaiter: two turns).

    Args:
        coro: the stage.
        later: start it as a task (its first step a turn of the loop later), not now.
    Raises:
        what the stage raised in its first step, if it completed there.
    Attributes:
        task: the task that goes on with the stage once it suspended; None when it
            completed at once (no task, no future).
    """

    __slots__ = ("_result", "_waiter", "task")

    def __init__(self, coro: Coroutine[Any, Any, _T], *, later: bool = False) -> None:
        self._waiter: asyncio.Future[None] | None = None
        self._result: _T | None = None
        self.task: asyncio.Task[_T] | None
        if later:
            self.task = asyncio.get_running_loop().create_task(self._run(coro))
            return
        context, finished, value = _first_step(coro)
        if finished:
            self.task, self._result = None, value
            return
        self._continue(coro, value, context)

    def _continue(self, coro: Coroutine[Any, Any, _T], yielded: Any,
                  context: contextvars.Context) -> None:
        self.task = asyncio.get_running_loop().create_task(
            _native(self._rest(coro, yielded)), context=context)

    async def _run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return await self._rest(coro, None, first=True)

    @types.coroutine
    def _rest(self, coro: Coroutine[Any, Any, _T], yielded: Any, *,
              first: bool = False) -> Generator[Any, Any, _T]:
        """The stage from its first step (`first`) or from where it suspended on `yielded`;
        its last step resolves the awaiter's future."""
        try:
            if first:
                return (yield from coro.__await__())
            return (yield from _go_on(coro, yielded))
        finally:                # the task is done once this step ends, before the awaiter runs
            waiter = self._waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    async def outcome(self) -> _T:
        """The stage's result, or what it raised (``CancelledError`` when it was
        cancelled itself).

        Raises:
            asyncio.CancelledError: the awaiting task was cancelled; the stage goes on.
        """
        task = self.task
        if task is None:
            return self._result  # type: ignore[return-value]
        if not task.done():
            waiter = self._waiter = task.get_loop().create_future()
            try:
                await waiter
            except asyncio.CancelledError:
                if not task.done():       # nobody may read what it ends with: not logged
                    task.add_done_callback(_retrieve)
                raise
        return task.result()


def begin(coro: Coroutine[Any, Any, None]) -> Stage[None] | None:
    """``Stage(coro)`` for a stage that returns nothing, without an object when it need
    not have one: None when the stage completed in its first step (what it raised there
    is raised here), else the ``Stage`` that goes on with it."""
    context, finished, yielded = _first_step(coro)
    if finished:
        return None
    stage: Stage[None] = Stage.__new__(Stage)
    stage._waiter, stage._result = None, None
    stage._continue(coro, yielded, context)
    return stage


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
