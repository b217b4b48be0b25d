"""`WasmSandbox`: one fresh wasmtime Store and instance per run (docs/design.md §3)."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import wasmtime

from . import _component, _interrupt, _pool
from ._host import GuestOutcome, HostStop, RunHost, decode_guest, outcome
from ._protocol import AnyRunError, Dispatch, FuelExhausted, GuestCrashed, RunOutcome, RunRequest
from ._ticker import EpochTicker
from .guest.cm_guest.modules import AVAILABLE as AVAILABLE_MODULES

_REQUEST_ENCODER = msgspec.json.Encoder()
_TICKER = EpochTicker(_component.engines)
# Wasm runs on the calling thread's native stack, which must exceed the wasm stack limit
# (wasmtime's Config.max_wasm_stack docs), so runs happen on threads of this size. The
# threads are kept: wasmtime sets up per-thread state on a thread's first wasm call, which
# a fresh thread per run would pay every time (~1 ms).
_THREAD_STACK_BYTES = 256 << 20
_RUNNERS = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="codemode-run")
_RUNNERS_LOCK = threading.Lock()


_T = TypeVar("_T")


def _on_runner_thread(fn: Callable[..., _T], *args: Any) -> _T:
    """`fn(*args)` on a runner thread; its exception, if any, re-raised here."""
    with _RUNNERS_LOCK:         # a thread the pool starts now gets the large stack
        previous = threading.stack_size(_THREAD_STACK_BYTES)
        try:
            future = _RUNNERS.submit(fn, *args)
        finally:
            threading.stack_size(previous)
    return future.result()


def _in_background(fn: Callable[[], None]) -> object:
    """Start `fn` on a runner thread (large stack) and return at once."""
    with _RUNNERS_LOCK:
        previous = threading.stack_size(_THREAD_STACK_BYTES)
        try:
            return _RUNNERS.submit(fn)
        finally:
            threading.stack_size(previous)


# Instances made ahead of their run (`_pool`): one ready per key, prepared and torn down in
# the background.
POOL = _pool.InstancePool(_in_background, size=1)


class _Run(RunHost):
    """A run's host state (`RunHost`) plus the epoch-deadline verdict of the wasm tier."""

    def next_check(self) -> int | None:
        """Epoch ticks until the run's next check, or None to end it now (cancelled, out
        of time, output past its limit); called by `_interrupt` on the run's thread."""
        if self.stop_reason() is not None:
            return None
        return min(_interrupt.CHECK_TICKS, EpochTicker.ticks_for(self.remaining_s()))


_local = threading.local()


def _current() -> _Run:
    run: _Run | None = getattr(_local, "run", None)
    if run is None:                       # an instance outliving its run: refuse
        raise HostStop(GuestCrashed(message="host call outside of a run"))
    return run


def _host_dispatch(_store: Any, batch: str) -> str:
    return _current().dispatch_batch(batch)


def _host_sleep(_store: Any, seconds: float) -> None:
    _current().sleep(seconds)


class WasmSandbox:
    """Runs programs in CPython compiled to a WebAssembly component, in wasmtime.

    Each run gets a fresh Store and instance (usually made ahead of it: `_pool`) with no
    preopened directories, an empty environment, no sockets and no subprocesses;
    stdout/stderr are captured on the host as they are written (`_capture.PipeCapture`).
    The Engine, Component and Linker are shared per process (and the compiled component
    per machine, on disk).
    """

    #: What programs may import: the guest's own list (`cm_guest.runtime.ALLOWED_MODULES`).
    allowed_modules: frozenset[str] = AVAILABLE_MODULES

    def run(self, request: RunRequest, dispatch: Dispatch,
            cancel: threading.Event | None = None) -> RunOutcome:
        """Run one program and report how it ended (docs/design.md §3).

        Args:
            request: source text, tool specs, limits.
            dispatch: called on the run's thread per sub-call batch (`sandbox._wire`).
            cancel: set it from any thread to stop the run at its next host call (sub-call
                or sleep); running wasm is stopped by the wall-clock deadline.
        Returns:
            The outcome; a tripped limit is a typed `error`, never an exception.
        Raises:
            SandboxUnavailable: the component could not be built or loaded.
        """
        limits = request.limits
        config = _component.EngineConfig(fuel=limits.fuel is not None,
                                         stack_bytes=limits.stack_bytes)
        runtime = _component.runtime_for(config, _host_dispatch, _host_sleep)
        _TICKER.ensure_started()
        return _on_runner_thread(self._run_here, runtime, request, dispatch, cancel)

    def _run_here(self, runtime: _component.Runtime, request: RunRequest, dispatch: Dispatch,
                  cancel: threading.Event | None) -> RunOutcome:
        limits = request.limits
        guest_request = _REQUEST_ENCODER.encode({
            "code": request.code, "tools": request.tools, "limits": limits.for_guest()
        }).decode()
        run = _Run(limits, dispatch, cancel)
        # A made-ahead instance (the plain Linker only), else one made on the run's path.
        fresh = POOL.take(runtime, limits.memory_bytes) \
            or _pool.Fresh.new(runtime, limits.memory_bytes)
        fresh.pipes.bind(run.stdout, run.stderr)
        store = fresh.store
        ended: GuestOutcome | AnyRunError
        try:
            if limits.fuel is not None:
                store.set_fuel(limits.fuel)
            _TICKER.catch_up()
            _interrupt.install(store, run.next_check)
            _local.run = run
            started = time.monotonic()
            try:
                run_func = fresh.run_func or fresh.instantiate(runtime)
                ended = decode_guest(run_func(store, guest_request))
            except HostStop as stop:
                ended = stop.error
            except wasmtime.WasmtimeError as exc:
                ended = self._explain_trap(run, store, exc)
            finally:
                _local.run = None
                _interrupt.uninstall()
            duration = time.monotonic() - started
            fuel_used = None if limits.fuel is None else limits.fuel - store.get_fuel()
        finally:
            POOL.retire(fresh)    # reads the rest of the output; closed in the background
        return outcome(run, ended, duration_s=duration, fuel_used=fuel_used)

    def _explain_trap(self, run: _Run, store: wasmtime.Store,
                      exc: wasmtime.WasmtimeError) -> AnyRunError:
        """Which limit ended the run, from host-owned state, never from the message."""
        if run.limits.fuel is not None and store.get_fuel() == 0:
            return FuelExhausted(message=f"the run used all of its {run.limits.fuel} fuel")
        reason = run.stop_reason()
        if reason is not None:
            return reason
        # No limit explains it: native recursion exhausted the wasm stack (freeing a
        # structure nested hundreds of thousands deep), or C code aborted on an allocation
        # that failed near the memory limit.
        frames = [line.strip() for line in str(exc).splitlines()[1:] if "!" in line][:3]
        where = f" in {' <- '.join(f.split('!', 1)[1] for f in frames)}" if frames else ""
        return GuestCrashed(message="the sandbox instance trapped (wasm stack or memory "
                                    f"exhausted in native code){where}")
