"""An asyncio event loop that needs no sockets or selectors (DESIGN.md §3).

CPython's default loop opens a socket pair for its self-pipe, which the sandbox forbids. This
loop keeps asyncio's scheduling (tasks, timers, gather, TaskGroup, wait_for) and replaces the
selector: when no callback is ready, the calls the tasks are waiting on go to the host as one
batch, bounded by the next timer; with no calls and a timer pending, the loop sleeps through
the host (bounded by the run's deadline).
"""

import asyncio
import asyncio.events
import sys

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
