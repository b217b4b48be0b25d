"""`WasmSandbox`: one fresh wasmtime Store and instance per run (DESIGN.md §3)."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec
import wasmtime
from msgspec import UNSET

from . import _component, _interrupt, _wire
from ._capture import OutputCapture, PipeCapture
from ._limits import SandboxLimits
from ._protocol import (AnyRunError, Dispatch, FuelExhausted, GuestCrashed,
                        HostDispatchFailed, MemoryLimitExceeded, OutputLimitExceeded,
                        ProgramError, RunAborted, RunOutcome, RunRequest,
                        SubcallLimitExceeded, TimeLimitExceeded)
from ._ticker import EpochTicker

_REQUEST_ENCODER = msgspec.json.Encoder()
_TICKER = EpochTicker(_component.engines)
# Wasm runs on the calling thread's native stack, which must exceed the wasm stack limit
# (wasmtime's Config.max_wasm_stack docs), so runs happen on threads of this size. The
# threads are kept: wasmtime sets up per-thread state on a thread's first wasm call, which
# a fresh thread per run would pay every time (~1 ms).
_THREAD_STACK_BYTES = 256 << 20
_RUNNERS = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="codemode-run")
_RUNNERS_LOCK = threading.Lock()


def _on_runner_thread(fn: Callable[..., RunOutcome], *args: Any) -> RunOutcome:
    """`fn(*args)` on a runner thread; its exception, if any, re-raised here."""
    with _RUNNERS_LOCK:         # a thread the pool starts now gets the large stack
        previous = threading.stack_size(_THREAD_STACK_BYTES)
        try:
            future = _RUNNERS.submit(fn, *args)
        finally:
            threading.stack_size(previous)
    return future.result()


class _Trip(Exception):
    """Raised from a host function to end the run; becomes a trap in the guest."""

    def __init__(self, error: AnyRunError) -> None:
        super().__init__(error.message)
        self.error = error


class _Run:
    """Host-owned state of one run: what the host functions need and what they saw."""

    def __init__(self, limits: SandboxLimits, dispatch: Dispatch,
                 cancel: threading.Event | None) -> None:
        self.limits = limits
        self.dispatch = dispatch
        self.cancel = cancel or threading.Event()
        self.deadline = time.monotonic() + limits.wall_clock_s
        self.subcalls = 0
        self.stdout = OutputCapture("stdout", limits.output_bytes)
        self.stderr = OutputCapture("stderr", limits.output_bytes)

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def next_check(self) -> int | None:
        """Epoch ticks until the run's next check, or None to end it now (cancelled or
        out of time); called by `_interrupt` on the run's thread."""
        remaining = self.remaining_s()
        if self.cancel.is_set() or remaining <= 0 or self.stdout.over or self.stderr.over:
            return None
        return min(_interrupt.CHECK_TICKS, EpochTicker.ticks_for(remaining))

    def time_up(self) -> _Trip:
        return _Trip(TimeLimitExceeded(
            message=f"the run exceeded its wall-clock limit of {self.limits.wall_clock_s} s"))

    def check(self) -> None:
        if self.cancel.is_set():
            raise _Trip(RunAborted(message="the run was cancelled"))
        if self.remaining_s() <= 0:
            raise self.time_up()


_local = threading.local()


def _current() -> _Run:
    run: _Run | None = getattr(_local, "run", None)
    if run is None:                       # an instance outliving its run: refuse
        raise _Trip(GuestCrashed(message="host call outside of a run"))
    return run


def _host_dispatch(_store: Any, batch: str) -> str:
    run = _current()
    run.check()
    limits = run.limits
    if len(batch) > limits.request_bytes * 4:
        raise _Trip(HostDispatchFailed(
            message=f"a sub-call batch of {len(batch)} bytes exceeds the host's limit"))
    try:
        request = _wire.request_decoder.decode(batch)
    except msgspec.DecodeError as exc:
        raise _Trip(HostDispatchFailed(message=f"malformed sub-call batch: {exc}")) from None
    run.subcalls += len(request.calls)
    if run.subcalls > limits.max_subcalls:
        raise _Trip(SubcallLimitExceeded(
            message=f"the program made more than {limits.max_subcalls} sub-calls"))
    remaining = max(run.remaining_s(), 0.0)
    wait_s = remaining if request.wait_s is None else min(max(request.wait_s, 0.0), remaining)
    bounded = msgspec.structs.replace(request, wait_s=wait_s)
    try:
        reply = run.dispatch(_wire.encoder.encode(bounded).decode())
        _wire.reply_decoder.decode(reply)        # never hand the guest malformed data
    except msgspec.DecodeError as exc:
        raise _Trip(HostDispatchFailed(message=f"the dispatcher's reply is malformed: {exc}"))
    except _Trip:
        raise
    except Exception as exc:
        raise _Trip(HostDispatchFailed(
            message=f"the dispatcher raised {type(exc).__name__}: {exc}")) from exc
    run.check()
    return reply


def _host_sleep(_store: Any, seconds: float) -> None:
    run = _current()
    run.check()
    remaining = run.remaining_s()
    if seconds >= remaining:
        run.cancel.wait(max(remaining, 0.0))
        run.check()
        raise run.time_up()
    if run.cancel.wait(seconds):
        run.check()


class WasmSandbox:
    """Runs programs in CPython compiled to a WebAssembly component, in wasmtime.

    Each run gets a fresh Store and instance with no preopened directories, an empty
    environment, no sockets and no subprocesses; stdout/stderr are captured by the guest.
    The Engine, Component and Linker are shared per process (and the compiled component
    per machine, on disk).
    """

    def run(self, request: RunRequest, dispatch: Dispatch,
            cancel: threading.Event | None = None) -> RunOutcome:
        """Run one program and report how it ended (DESIGN.md §3).

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
        store = wasmtime.Store(runtime.engine)
        pipes = PipeCapture(run.stdout, run.stderr)
        try:
            store.set_limits(memory_size=limits.memory_bytes)
            wasi = wasmtime.WasiConfig()             # nothing preopened, no env, no network
            wasi.argv = ["<program>"]                # sys.argv (argparse reads argv[0])
            pipes.attach(wasi)
            store.set_wasi(wasi)
            if limits.fuel is not None:
                store.set_fuel(limits.fuel)
            _TICKER.catch_up()
            _interrupt.install(store, run.next_check)
            _local.run = run
            started = time.monotonic()
            try:
                instance = runtime.linker.instantiate(store, runtime.component)
                run_func = instance.get_func(store, "run")
                assert run_func is not None, "the guest component exports no `run`"
                reply = run_func(store, guest_request)
            except _Trip as trip:
                outcome = self._ended(run, store, started, trip.error)
            except wasmtime.WasmtimeError as exc:
                outcome = self._ended(run, store, started, self._explain_trap(run, store, exc))
            else:
                outcome = self._decode(run, store, started, reply)
            finally:
                _local.run = None
                _interrupt.uninstall()
        finally:
            store.close()                 # closes the pipes' write ends
            pipes.close()
        return self._with_output(run, outcome)

    @staticmethod
    def _with_output(run: _Run, outcome: RunOutcome) -> RunOutcome:
        """The outcome with everything the program wrote; a stream written past the limit
        (by writing to its file descriptor itself) ends the run at the output limit."""
        over = [c.name for c in (run.stdout, run.stderr) if c.over]
        if over and outcome.status != "limit":
            outcome = msgspec.structs.replace(
                outcome, status="limit", value=UNSET, error=OutputLimitExceeded(
                    message=f"{over[0]} exceeded {run.limits.output_bytes} bytes"))
        return msgspec.structs.replace(outcome, stdout=run.stdout.text(),
                                       stderr=run.stderr.text())

    def _fuel_used(self, run: _Run, store: wasmtime.Store) -> int | None:
        if run.limits.fuel is None:
            return None
        return run.limits.fuel - store.get_fuel()

    def _ended(self, run: _Run, store: wasmtime.Store, started: float,
               error: AnyRunError) -> RunOutcome:
        return RunOutcome(status="limit" if error.limit else "error", error=error,
                          duration_s=time.monotonic() - started, subcalls=run.subcalls,
                          fuel_used=self._fuel_used(run, store))

    def _explain_trap(self, run: _Run, store: wasmtime.Store,
                      exc: wasmtime.WasmtimeError) -> AnyRunError:
        """Which limit ended the run, from host-owned state, never from the message."""
        if run.limits.fuel is not None and store.get_fuel() == 0:
            return FuelExhausted(message=f"the run used all of its {run.limits.fuel} fuel")
        if run.remaining_s() <= 0:
            return run.time_up().error
        if run.cancel.is_set():
            return RunAborted(message="the run was cancelled")
        for capture in (run.stdout, run.stderr):
            if capture.over:
                return OutputLimitExceeded(
                    message=f"{capture.name} exceeded {run.limits.output_bytes} bytes")
        # No limit explains it: most often native recursion exhausted the wasm stack, or
        # C code aborted on an allocation that failed near the memory limit.
        frames = [line.strip() for line in str(exc).splitlines()[1:] if "!" in line][:3]
        where = f" in {' <- '.join(f.split('!', 1)[1] for f in frames)}" if frames else ""
        return GuestCrashed(message="the sandbox instance trapped (wasm stack or memory "
                                    f"exhausted in native code){where}")

    def _decode(self, run: _Run, store: wasmtime.Store, started: float,
                reply: str) -> RunOutcome:
        data = msgspec.json.decode(reply)
        error: AnyRunError | None = None
        raw_error = data.get("error")
        status = data["status"]
        if status == "limit":
            limit = data.get("limit")
            message = raw_error["message"] if raw_error else limit
            if limit == "memory":
                error = MemoryLimitExceeded(message=message)
            elif limit == "output":
                error = OutputLimitExceeded(message=message)
            elif limit == "subcalls":
                error = SubcallLimitExceeded(message=message)
            else:
                error = GuestCrashed(message=message)
        elif status == "error":
            error = ProgramError(type=raw_error["type"], message=raw_error["message"],
                                 traceback=raw_error.get("traceback", ""))
        return RunOutcome(
            status=status, value=data["value"] if "value" in data else UNSET, error=error,
            duration_s=time.monotonic() - started, subcalls=run.subcalls,
            fuel_used=self._fuel_used(run, store))
