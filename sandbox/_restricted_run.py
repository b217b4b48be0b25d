"""One run of the restricted tier, as the program's host: `_Run` and the event loop its async
code runs on.

`_Run` is `RunHost` (deadline, cancellation, sub-call budget, captured output) plus what the
program meets of this tier: its limit state (`trip`, the `_tick_()` check, the allocation
check), its capped streams and tool bridge, and the handshake by which the watchdog stops
the worker thread with an injected `_Stop`. `_RunLoop` is the per-run `asyncio` loop whose
idle step sends the queued tool calls as one batch or sleeps through the run. The module
views, the guards and the runner all act on a `_Run`; it knows none of them.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
from collections.abc import Callable
from typing import Any

from ._capture import OnOutput
from ._host import HostStop, RunHost
from ._limits import SandboxLimits
from ._protocol import Dispatch
from .guest.cm_guest import aio, runtime
from .guest.cm_guest.errors import LimitReached
from .guest.cm_guest.output import CappedSink, text_stream
from .guest.cm_guest.tools import Bridge

# ---- one run's state -------------------------------------------------------------------

class _Stop(BaseException):
    """Injected into the worker thread by the watchdog once the run is over."""


_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc


class _Run(RunHost):
    """Host-owned state of one run (`RunHost`), shared by the worker and the watchdog,
    plus what this tier adds: the program's limit state, the worker/watchdog handshake,
    the program's streams and tool bridge."""

    def __init__(self, limits: SandboxLimits, dispatch: Dispatch,
                 cancel: threading.Event | None, on_output: OnOutput | None = None) -> None:
        super().__init__(limits, dispatch, cancel, on_output)
        self.state = runtime.RunState()
        self.lock = threading.Lock()
        self.ident: int | None = None
        self.done = False          # the program's code has stopped running (worker side)
        self.over = False          # program code met after this raises at once
        self.error: BaseException | None = None
        self.has_value = False
        self.value: Any = None
        self.result: dict[str, Any] | None = None      # plain data, built by the worker
        cap = limits.output_cap_bytes
        self.out = text_stream(CappedSink(cap, self.state, "stdout", self.stdout.write))
        self.err = text_stream(CappedSink(cap, self.state, "stderr", self.stderr.write))
        self.bridge = Bridge(self.host_dispatch, limits.for_guest())

    # -- limits --

    def trip(self, limit: str, message: str) -> LimitReached:
        """Record `limit` (a RunError kind) for the run; the exception to raise into the
        program, which a bare `except:` may catch but cannot undo."""
        self.state.trip(limit, message)
        return LimitReached(self.state.limit, self.state.limit_message)

    def trip_time_up(self) -> LimitReached:
        error = self.time_up()
        return self.trip(error.kind, error.message)

    def tick(self) -> bool:
        """`_tick_()` in program code: cheap, raises once the run is over."""
        if self.state.limit is not None or self.over:
            raise LimitReached(self.state.limit or "timeout",
                               self.state.limit_message or "the run is over")
        return True

    def too_big(self, nbytes: float) -> None:
        if nbytes > self.limits.memory_bytes:
            self.state.trip("memory", f"the program tried to allocate about {int(nbytes)} "
                                      f"bytes, over its limit of {self.limits.memory_bytes}")
            raise MemoryError(self.state.limit_message)

    # -- worker/watchdog handshake --

    def finish(self) -> None:
        """The worker leaves program code: no stop is injected after this, and one pending
        is dropped."""
        with self.lock:
            self.done = True
            if self.ident is not None:
                _set_async_exc(ctypes.c_ulong(self.ident), None)

    def inject(self) -> None:
        with self.lock:
            if not self.done and self.ident is not None:
                _set_async_exc(ctypes.c_ulong(self.ident), ctypes.py_object(_Stop))

    # -- host services for the program (`RunHost`'s, a stop raised into the program) --

    def _stopped(self, stop: HostStop) -> LimitReached:
        return self.trip(stop.error.kind, stop.error.message)

    def host_dispatch(self, batch: str) -> str:
        """The guest Bridge's `dispatch`: `RunHost.dispatch_batch`, as in `WasmSandbox`."""
        if self.state.limit is not None:
            raise LimitReached(self.state.limit, self.state.limit_message)
        try:
            return self.dispatch_batch(batch)
        except HostStop as stop:
            raise self._stopped(stop) from None

    def sleep(self, seconds: float) -> None:
        """`time.sleep` and the idle event loop (`RunHost.sleep`)."""
        if self.state.limit is not None:
            raise LimitReached(self.state.limit, self.state.limit_message)
        try:
            super().sleep(seconds)
        except HostStop as stop:
            raise self._stopped(stop) from None


# ---- asyncio on the worker thread --------------------------------------------------------

class _RunSelector(aio._HostSelector):
    """The guest's `_HostSelector`, bound to one run instead of module globals."""

    def __init__(self, run: _Run) -> None:
        self._run = run

    def select(self, timeout: float | None) -> list[Any]:
        if timeout == 0:
            return []
        bridge = self._run.bridge
        if not bridge.idle:
            bridge.flush(timeout)
            return []
        if timeout is None:
            raise RuntimeError("deadlock: every task is waiting and nothing (no tool call, "
                               "no timer) can wake any of them")
        self._run.sleep(timeout)
        return []

    def close(self) -> None:
        pass


def _refused(what: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(f"{what} is not available in the sandbox")
    return refuse


class _RunLoop(aio.SandboxEventLoop):
    """`aio.SandboxEventLoop` for one run: tool calls batch through the run's Bridge, idle
    time sleeps through the run; threads, sockets, pipes, signals and subprocesses refused."""

    def __init__(self, run: _Run) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # the guest is unannotated
        self._selector = _RunSelector(run)
        self._run = run

    def close(self) -> None:
        if not self.is_running():
            self._run.bridge.abandon()
        asyncio.BaseEventLoop.close(self)



for _name in ("run_in_executor", "set_default_executor", "subprocess_exec", "subprocess_shell",
              "create_connection", "create_server", "create_datagram_endpoint",
              "create_unix_connection", "create_unix_server", "connect_accepted_socket",
              "connect_read_pipe", "connect_write_pipe", "getaddrinfo", "getnameinfo",
              "sock_recv", "sock_recv_into", "sock_recvfrom", "sock_recvfrom_into",
              "sock_sendall", "sock_sendto", "sock_connect", "sock_accept", "sock_sendfile",
              "sendfile", "start_tls", "add_reader", "add_writer", "add_signal_handler"):
    setattr(_RunLoop, _name, _refused(f"loop.{_name}()"))
del _name
