"""asyncio in the sandbox: an event loop that needs no sockets or selectors, and the
program's asyncio entry points (docs/design.md §3).

CPython's default loop opens a socket pair for its self-pipe, which the sandbox forbids. This
loop keeps asyncio's scheduling (tasks, timers, gather, TaskGroup, wait_for) and replaces the
selector: when no callback is ready, the queued tool calls go to the host as one batch, and
the loop waits (bounded by the next timer) for a call some task awaits; with no calls and a
timer pending, the loop sleeps through the host (bounded by the run's deadline).

`ENTRY_POINTS` are the program's `gather`, `wait`, `as_completed`, `create_task`,
`ensure_future`, `wait_for`, `shield` and `TaskGroup`: asyncio's own, except that each also
takes a pending tool call (as a future of the running loop that completes with its value,
one per use) and a value that is not awaitable at all, which counts as already completed
with that value (`await asyncio.gather(x, y)` where `x` is a plain result works).
`create_task` and `TaskGroup.create_task` take any awaitable, and `wait` coroutines too
(asyncio refuses both), each wrapped in a task. `await x` itself is syntax and keeps
Python's rule (a plain value raises TypeError); `loop.create_task` and `asyncio.Task(...)`
keep asyncio's (a coroutine only).
"""

import asyncio
import asyncio.events
import inspect
import sys

from .pending import PendingCall

_bridge = None      # the current run's Bridge; one run per instance
_sleep = None       # host sleep(seconds)


def install(bridge, sleep):
    global _bridge, _sleep
    _bridge, _sleep = bridge, sleep


class _HostSelector:
    """The part of a selector `BaseEventLoop._run_once` uses: `select(timeout)`."""

    def select(self, timeout):
        if timeout == 0:
            return []                      # callbacks are ready: let them run first
        if _bridge is not None and not _bridge.idle:
            _bridge.flush(timeout)
            return []
        if timeout is None:
            raise RuntimeError(
                "deadlock: every task is waiting and nothing (no tool call, no timer) "
                "can wake any of them"
            )
        _sleep(timeout)
        return []

    def close(self):
        pass


class SandboxEventLoop(asyncio.BaseEventLoop):
    """`asyncio.BaseEventLoop` driven by tool-call batches instead of file descriptors."""

    def __init__(self):
        super().__init__()
        self._selector = _HostSelector()

    def _process_events(self, event_list):
        pass

    def _write_to_self(self):
        pass                               # single-threaded: nothing to wake

    def close(self):
        if _bridge is not None and not self.is_running():
            _bridge.abandon()
        super().close()


# Python 3.14 (the guest) renamed the base policy; the host side imports this module too.
if sys.version_info >= (3, 14):
    _BasePolicy = asyncio.events._BaseDefaultEventLoopPolicy
else:
    _BasePolicy = asyncio.events.BaseDefaultEventLoopPolicy


class _Policy(_BasePolicy):
    _loop_factory = SandboxEventLoop


def install_policy():
    """Make `asyncio.run`, `asyncio.new_event_loop` & co. build a `SandboxEventLoop`."""
    setter = getattr(asyncio.events, "_set_event_loop_policy", None)
    if setter is None:                     # Python < 3.14
        setter = asyncio.set_event_loop_policy
    setter(_Policy())


def running_sandbox_loop():
    """The running SandboxEventLoop, or None in synchronous code."""
    loop = asyncio.events._get_running_loop()
    return loop if isinstance(loop, SandboxEventLoop) else None


# ---- the program's asyncio entry points ----------------------------------------------------

async def _completed(value):
    return value


async def _awaiting(awaitable):
    return await awaitable


def _awaitable(obj):
    """What asyncio's own function gets for `obj`: a pending call's future, an awaitable
    unchanged, anything else a coroutine that returns it."""
    if type(obj) is PendingCall:
        if asyncio.events._get_running_loop() is None:
            return _awaiting(obj)
        return obj._future()
    if asyncio.isfuture(obj) or asyncio.iscoroutine(obj) or inspect.isawaitable(obj):
        return obj
    return _completed(obj)


def _coroutine(obj):
    """What a task is made of: a coroutine unchanged, else one awaiting or returning `obj`."""
    if asyncio.iscoroutine(obj):
        return obj
    if type(obj) is PendingCall or asyncio.isfuture(obj) or inspect.isawaitable(obj):
        return _awaiting(obj)
    return _completed(obj)


# asyncio's own functions, taken before the guest puts ENTRY_POINTS in their place.
_gather, _wait, _as_completed, _create_task, _ensure_future, _wait_for, _shield = (
    asyncio.gather, asyncio.wait, asyncio.as_completed, asyncio.create_task,
    asyncio.ensure_future, asyncio.wait_for, asyncio.shield)


def gather(*aws, return_exceptions=False):
    return _gather(*map(_awaitable, aws), return_exceptions=return_exceptions)


def wait(aws, *, timeout=None, return_when=asyncio.ALL_COMPLETED):
    futures = [a if asyncio.isfuture(a) else _ensure_future(_awaitable(a)) for a in aws]
    return _wait(futures, timeout=timeout, return_when=return_when)


def as_completed(aws, *, timeout=None):
    return _as_completed([_awaitable(a) for a in aws], timeout=timeout)


def create_task(coro, **kwargs):
    return _create_task(_coroutine(coro), **kwargs)


def ensure_future(coro_or_future, *, loop=None):
    return _ensure_future(_awaitable(coro_or_future), loop=loop)


def wait_for(aw, timeout):
    return _wait_for(_awaitable(aw), timeout)


def shield(arg):
    return _shield(_awaitable(arg))


class TaskGroup(asyncio.TaskGroup):
    __doc__ = asyncio.TaskGroup.__doc__

    def create_task(self, coro, **kwargs):
        return super().create_task(_coroutine(coro), **kwargs)


for _fn, _own in ((gather, _gather), (wait, _wait), (as_completed, _as_completed),
                  (create_task, _create_task), (ensure_future, _ensure_future),
                  (wait_for, _wait_for), (shield, _shield)):
    _fn.__doc__ = _own.__doc__
del _fn, _own
ENTRY_POINTS = {f.__name__: f for f in (gather, wait, as_completed, create_task,
                                        ensure_future, wait_for, shield, TaskGroup)}
