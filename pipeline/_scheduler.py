"""The one scheduler: calls through the pipeline in submission order (docs/pipeline-spec.md §2 S0,
§11.4). ``Session.call_batch`` (one assistant message's calls) and Code Mode's sub-call
dispatcher (one program's calls) both run on it; each adds only its own events through
``on_start`` and ``on_commit``.

For each call, in submission order::

    QUEUED ──> STARTING ──> DISPATCHING ──> WAITING ──> COMMITTING ──> COMMITTED
      │        (on_start,    (S8–S10:       (for the     (S11–S14,
      │         S3–S7: one    overlap in     calls        then on_commit,
      │         call at a     the pool)      before it)   in order)
      │         time)              │                          ^
      │                            └── (drain) ABANDONED ─────┘  TOOL_OUTCOME_UNKNOWN
      └── (closed before its start) DROPPED: no on_start, no on_commit, no tools/result

- **Ordered starts**: a call starts (``on_start``, then S3–S7) only after the call before it
  finished S3–S7. Classification (``exclusive(call)``) is read just before.
- **Pool**: at most ``pool`` calls are between their start and the end of their dispatch.
- **Exclusive barrier**: an exclusive call starts only after every earlier call committed,
  and the next call starts only after it committed.
- **Ordered commits**: a call commits (S11–S14, then ``on_commit``) only after its own
  dispatch ended and the call before it committed.
- **Cancellation** is the callers' signals' business (each ``ExecutionInput`` carries one);
  the scheduler never abandons a call on its own. ``drain`` (a sub-call run that ended)
  drops the calls that did not start, waits for the others, then abandons the ones still
  stuck: each is committed through the pipeline as it stands, or as the ``abandon_error``
  outcome (``PendingCall.abandon``), in order, with its ``on_commit``.

A failure of ``on_start`` or ``on_commit`` (a log that refuses an append, say) is the
owner's: the scheduler stops starting calls, drops the rest, and ``join`` raises it.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from ._eager import Stage, begin, eager, launch
from ._errors import InvalidArgumentsError
from ._execution import ExecutionInput
from ._normalize import failure_from
from ._pending import PendingCall
from ._result import CallResult

__all__ = ["CallState", "Scheduled", "Scheduler", "eager"]


class CallState(enum.Enum):
    """Where a scheduled call is (the module docstring draws the transitions)."""

    QUEUED = "queued"
    STARTING = "starting"
    DISPATCHING = "dispatching"
    WAITING = "waiting"
    ABANDONED = "abandoned"
    COMMITTING = "committing"
    COMMITTED = "committed"
    DROPPED = "dropped"


_FINAL = (CallState.COMMITTED, CallState.DROPPED)


class _Mark:
    """A point a call passes once (started, done). ``wait()`` wakes one turn of the loop
    after it, its future resolved here directly (awaiting ``asyncio.shield(future)`` takes
    two turns); cancelling it leaves the mark alone. Its ``future``, if given, resolves
    then too (for owners that await it themselves)."""

    __slots__ = ("_waiters", "future", "passed")

    def __init__(self, future: asyncio.Future[None] | None = None) -> None:
        self.future = future
        self.passed = False
        self._waiters: list[asyncio.Future[None]] | None = None

    def set(self) -> bool:
        """Pass the mark; False if it was passed already."""
        if self.passed:
            return False
        self.passed = True
        if self.future is not None and not self.future.done():
            self.future.set_result(None)
        if self._waiters is not None:
            for waiter in self._waiters:
                if not waiter.done():
                    waiter.set_result(None)
            self._waiters = None
        return True

    async def wait(self) -> None:
        if not self.passed:
            waiter = asyncio.get_running_loop().create_future()
            if self._waiters is None:
                self._waiters = []
            self._waiters.append(waiter)
            await waiter


class Scheduled:
    """One call in a ``Scheduler``.

    Attributes:
        index: submission order, from 0.
        input: what the call runs.
        data: the owner's own record for the call (given to ``submit``).
        state: a ``CallState``.
        pending: the pipeline's call once prepared (``None`` before, or if ``prepare``
            refused the input).
        result: the published result once committed; for a dropped call the failure
            ``run is over; not dispatched`` (``ABORTED``), never published.
        done: resolved once the call is committed or dropped (also when its
            ``on_commit`` was cut short by ``drain``: then ``state`` is not ``COMMITTED``).
        error: what ``on_start``/``on_commit`` raised, if anything.
    """

    __slots__ = ("_dispatching", "_done", "_slot", "_started", "_starting", "_task", "data",
                 "done", "error", "index", "input", "pending", "result", "state")

    def __init__(
        self, index: int, inp: ExecutionInput, data: Any, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.index = index
        self.input = inp
        self.data = data
        self.state = CallState.QUEUED
        self.pending: PendingCall | None = None
        self.result: CallResult | None = None
        self.error: BaseException | None = None
        self.done: asyncio.Future[None] = loop.create_future()
        self._done = _Mark(self.done)
        self._started = _Mark()  # S3–S7 over: the next call may start
        self._task: asyncio.Future[None] | None = None
        self._starting: asyncio.Future[None] | None = None
        self._dispatching: asyncio.Future[None] | None = None
        self._slot = False

    def __repr__(self) -> str:
        return (
            f"<Scheduled #{self.index} {self.input.name} {self.input.call_id} {self.state.value}>"
        )


DROPPED_MESSAGE = "run is over; not dispatched"


class Scheduler:
    """Runs submitted calls through the pipeline (module docstring).

    Args:
        prepare: makes the pipeline's call for an input (``Session.prepare``).
        pool: calls at once between their start and the end of their dispatch (>= 1).
        exclusive: ``call -> bool``, read just before the call starts; ``True`` makes it a
            barrier (a tool not declared concurrency-safe).
        on_start: ``call -> None``, right before S3 (e.g. append ``tool/call``).
        on_commit: ``call -> awaitable``, after S14 in submission order, with
            ``call.result`` set (e.g. append ``tool/result``, queue contexts).
        abandons: whether the owner may ``drain``: each call's S3–S7 and S8–S10 then run
            as tasks of their own once they wait, so that abandoning a call never waits on
            a stage that ignores (or swallows) cancellation. An owner that never drains (a
            batch of model calls) passes False: a call's dispatch then runs in the call's
            own task (a task and a turn of the loop fewer for a body that waits), and the
            last call of a sealed scheduler in the lane's task (``run``).
        loop: the event loop the scheduler is used on, when the owner has it at hand: the
            calls' futures and tasks are made on it, and the running loop is never looked
            up (each look-up costs CPython 3.11 a ``getpid`` system call). Default: the
            loop running at each ``submit`` and ``start``.
    """

    def __init__(
        self,
        prepare: Callable[[ExecutionInput], PendingCall],
        *,
        pool: int,
        exclusive: Callable[[Scheduled], bool],
        on_start: Callable[[Scheduled], None],
        on_commit: Callable[[Scheduled], Awaitable[None]],
        abandons: bool = True,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if pool < 1:
            raise ValueError("pool must be >= 1")
        self._prepare = prepare
        self._exclusive = exclusive
        self._on_start = on_start
        self._on_commit = on_commit
        self._slots = asyncio.Semaphore(pool)
        self._calls: list[Scheduled] = []
        self._open = 0  # calls not done yet
        self._joiners: list[asyncio.Future[None]] = []  # `join`'s, resolved by the last done
        self._queue: collections.deque[Scheduled] = collections.deque()
        self._driver: asyncio.Future[None] | None = None  # the ordered lane, once started
        self._in_drive = False  # the lane is running (eagerly: its future is not set yet)
        self._previous: Scheduled | None = None  # the call that started last
        self._sealed = False
        self._closed = False
        self._abandon_error: Callable[[], BaseException] | None = None
        self._abandons = abandons
        self._loop = loop

    @property
    def calls(self) -> list[Scheduled]:
        """Every submitted call, in submission order."""
        return list(self._calls)

    @property
    def closed(self) -> bool:
        return self._closed

    def submit(self, inp: ExecutionInput, data: Any = None, *, start: bool = True) -> Scheduled:
        """Queue a call behind those already submitted; returns at once. The queued calls
        start at the loop's next turn, or, with ``start=False``, when the owner calls
        ``start()`` (having submitted what belongs together: one batch of a program).

        Raises:
            RuntimeError: the scheduler was sealed or closed (``seal``, ``drain``, or an
                owner failure).
        """
        if self._closed or self._sealed:
            raise RuntimeError("the scheduler takes no more calls")
        loop = self._running_loop()
        call = Scheduled(len(self._calls), inp, data, loop)
        self._calls.append(call)
        self._open += 1
        self._queue.append(call)
        if start and not self._driving():
            self._driver = loop.create_task(self._drive())
        return call

    def start(self) -> None:
        """Start the queued calls now, in order, each as far as it goes without waiting
        (a call whose every stage is synchronous commits before this returns); what waits
        goes on as a task. No-op while the calls are already being started."""
        if not self._driving():
            self._driver = launch(self._drive(), self._running_loop())

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        """The loop given at construction, else the running one (looked up)."""
        return self._loop if self._loop is not None else asyncio.get_running_loop()

    def _driving(self) -> bool:
        return self._in_drive or (self._driver is not None and not self._driver.done())

    def seal(self) -> None:
        """No more submissions: the calls already submitted all run (a batch's calls)."""
        self._sealed = True

    async def run(self) -> list[Scheduled]:
        """Seal, start the submitted calls in the awaiting task, and wait until every one is
        committed (or dropped); returns them. The ordered lane runs in this task, not as a
        task of its own, and so do the last call's stages when the scheduler does not
        abandon (``abandons=False``): a batch of one call that waits takes no task and no
        turn of the loop besides the caller's.

        Raises:
            whatever an ``on_start``/``on_commit`` raised (as ``join``).
        """
        self.seal()
        if not self._driving():
            await self._drive()
        return await self.join()

    async def join(self) -> list[Scheduled]:
        """Wait until every submitted call is committed (or dropped); returns them.

        Raises:
            whatever an ``on_start``/``on_commit`` raised (the first, in submission order).
        """
        while True:
            calls = list(self._calls)
            if self._open:
                # resolved by the call done last (`_finish`): one turn of the loop earlier
                # than `asyncio.wait`, whose done callbacks resolve its own future
                joined = self._running_loop().create_future()
                self._joiners.append(joined)
                await joined
            if len(calls) == len(self._calls):
                break
        for call in calls:
            if call.error is not None:
                raise call.error
        return calls

    # -- the ordered lane ---------------------------------------------------------------
    async def _drive(self) -> None:
        """Start the queued calls in order; returns once none is left (the next
        submission drives again)."""
        self._in_drive = True
        loop = self._running_loop()
        try:
            while self._queue:
                call = self._queue.popleft()
                if call.state is not CallState.QUEUED:  # dropped while queued
                    continue
                previous = self._previous
                exclusive = self._exclusive(call)
                if exclusive and previous is not None and not previous.done.done():
                    await previous._done.wait()  # the barrier: all earlier committed
                await self._slots.acquire()
                if call.state is not CallState.QUEUED:
                    self._slots.release()
                    continue
                call._slot = True
                call.state = CallState.STARTING
                if not self._queue and self._sealed and not self._abandons:
                    # The last call of a lane nobody abandons runs in the lane's own task:
                    # no task of its own, no turn of the loop to hand its outcome over.
                    try:
                        await self._run(call, previous)
                    finally:
                        self._settled(call)
                else:
                    # (None: it committed in its first step, and `_run` settled it)
                    task = call._task = launch(self._run(call, previous), loop)
                    if task is None:
                        pass
                    elif task.done():  # settled now, not a turn of the loop later (a callback)
                        self._settled(call)
                    else:
                        task.add_done_callback(functools.partial(self._settled, call))
                    if not call._started.passed:
                        await call._started.wait()
                if call.error is not None:  # the owner failed: stop here
                    self._close()
                    return
                # (the last call of a sealed scheduler: nothing waits behind the barrier)
                if exclusive and not call.done.done() and (self._queue or not self._sealed):
                    await call._done.wait()
                self._previous = call
        finally:
            self._in_drive = False

    async def _run(self, call: Scheduled, previous: Scheduled | None) -> None:
        try:
            try:
                self._on_start(call)
            except Exception as exc:
                call.error = exc
                self._settled(call)
                return
            try:
                call.pending = self._prepare(call.input)
            except (TypeError, ValueError) as exc:  # a malformed input (an empty name):
                call.result = failure_from(InvalidArgumentsError(str(exc)))  # refused, typed
            except Exception as exc:
                call.result = failure_from(exc)
            if call.pending is not None:
                # S3–S7 and S8–S10 as tasks of their own once they wait: abandoning a call
                # never waits on a stage that ignores (or swallows) cancellation.
                starting = begin(call.pending.start())
                if starting is not None:
                    call._starting = starting.task
                    await starting.outcome()
            call._started.set()
            if call.pending is not None:
                call.state = CallState.DISPATCHING
                # With a call queued behind it, the dispatch waits one turn of the loop, so
                # that the next call starts (S3–S7) before this one's body runs.
                if self._queue:
                    dispatching: Stage[None] | None = Stage(call.pending.dispatch(), later=True)
                elif self._abandons:
                    dispatching = begin(call.pending.dispatch())
                else:
                    dispatching = None
                    await call.pending.dispatch()
                if dispatching is not None:
                    call._dispatching = dispatching.task
                    await dispatching.outcome()
            self._release(call)
            call.state = CallState.WAITING
            if previous is not None and not previous.done.done():
                await previous._done.wait()
            call.state = CallState.COMMITTING
            if call.pending is not None:
                call.result = await call.pending.commit()
        except asyncio.CancelledError:
            if self._abandon_error is None:
                raise
            self._release(call)
            call._started.set()
            if previous is not None:  # commits stay in order
                await previous._done.wait()
            call.result = await self._abandoned(call)
            call.state = CallState.COMMITTING
        try:
            await self._on_commit(call)
            call.state = CallState.COMMITTED
        except asyncio.CancelledError:
            if self._abandon_error is None:
                raise
            # cut short by drain: left COMMITTING, reported by drain as hanging
        except Exception as exc:
            call.error = exc
        self._settled(call)          # now, not a turn of the loop later (the done callback)

    async def _abandoned(self, call: Scheduled) -> CallResult:
        """The outcome of a call ``drain`` gave up waiting for: committed as it stands if
        its dispatch finished (it only waited its turn), else ``abandon_error``."""
        assert self._abandon_error is not None
        pending = call.pending
        if pending is None:
            return call.result or failure_from(self._abandon_error())
        if pending.published is not None:
            return pending.published
        dispatching = call._dispatching
        if (
            pending.phase == "dispatched"
            and not pending.abandoned
            and (
                dispatching is None
                or (
                    dispatching.done()
                    and not dispatching.cancelled()
                    and dispatching.exception() is None
                )
            )
        ):
            return await pending.commit()
        call.state = CallState.ABANDONED
        pending.abandon(self._abandon_error())
        return await pending.commit()

    def _release(self, call: Scheduled) -> None:
        if call._slot:
            call._slot = False
            self._slots.release()

    def _settled(self, call: Scheduled, _task: object = None) -> None:
        """Whatever ended the call's task (even a cancellation before it ran a line), its
        futures resolve and its slot is free."""
        self._release(call)
        if (
            call.state is CallState.STARTING
            and call.result is None
            and call.pending is None
            and call.error is None
            and not call._started.passed
        ):
            call.state = CallState.DROPPED  # cancelled before it began
            call.result = CallResult.failure(DROPPED_MESSAGE, code="ABORTED")
        call._started.set()
        self._finish(call)

    def _finish(self, call: Scheduled) -> None:
        """Resolve ``call.done`` (once); the last call done wakes ``join``."""
        if call._done.set():
            self._open -= 1
            if self._open == 0:
                for joined in self._joiners:
                    if not joined.done():
                        joined.set_result(None)
                self._joiners.clear()

    # -- ending ---------------------------------------------------------------------------
    def _close(self) -> None:
        """No more submissions; calls not started yet are dropped."""
        self._closed = True
        for call in self._calls:
            if call.state is CallState.QUEUED:
                call.state = CallState.DROPPED
                call.result = CallResult.failure(DROPPED_MESSAGE, code="ABORTED")
                call._started.set()
                self._finish(call)
        self._queue.clear()

    async def drain(
        self, *, abandon_after_s: float, abandon_error: Callable[[], BaseException]
    ) -> list[Scheduled]:
        """End a run: drop the calls that did not start, wait for the others, and after
        ``abandon_after_s`` seconds abandon those still running (see ``Scheduled``).
        The callers' signals should be aborted first, so that calls in flight stop.

        Returns:
            the started calls whose ``on_commit`` did not complete even ``abandon_after_s``
            seconds after they were abandoned (their owner records them as it can).
        Raises:
            RuntimeError: the scheduler was made with ``abandons=False``.
        """
        if not self._abandons:
            raise RuntimeError("this scheduler was made not to abandon calls (abandons=False)")
        self._abandon_error = abandon_error
        self._close()
        if self._driver is not None and not self._driver.done():
            self._driver.cancel()
        running = [c for c in self._calls if c._task is not None and not c._task.done()]
        if running:
            _, stuck = await asyncio.wait(
                [c._task for c in running if c._task is not None], timeout=abandon_after_s
            )
            for task in stuck:
                task.cancel()
            if stuck:
                await asyncio.wait(stuck, timeout=abandon_after_s)
        return [c for c in self._calls if c.state not in _FINAL]

