"""`WasmSandbox`: one fresh wasmtime Store and instance per run (DESIGN.md §3)."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

import msgspec
import wasmtime
from msgspec import UNSET, UnsetType

from . import _component, _interrupt, _pool, _wire
from ._limits import SandboxLimits
from ._protocol import (
    AnyRunError,
    Dispatch,
    FuelExhausted,
    GuestCrashed,
    HostDispatchFailed,
    MemoryLimitExceeded,
    OutputLimitExceeded,
    ProgramError,
    RunAborted,
    RunOutcome,
    RunRequest,
    SubcallLimitExceeded,
    TimeLimitExceeded,
)
from ._ticker import EpochTicker
from .guest.cm_guest import runtime as guest_runtime

_REQUEST_ENCODER = msgspec.json.Encoder()
# Room for the guest's own cut marker ("[... stdout truncated at N bytes]") past the limit.
_MARKER_BYTES = 128


class _GuestError(msgspec.Struct, frozen=True):
    type: str = "Error"
    message: str = ""
    traceback: str = ""


class _GuestOutcome(msgspec.Struct, frozen=True):
    """The guest's reply to `run` (`guest/cm_guest/runtime.py`). The program can rewrite the
    runtime that writes it, so the host validates its shape and checks its sizes again."""

    status: Literal["ok", "error", "limit"]
    stdout: str = ""
    stderr: str = ""
    value: Any | UnsetType = UNSET
    value_repr: bool = False
    limit: str | None = None
    error: _GuestError | None = None


_OUTCOME_DECODER = msgspec.json.Decoder(_GuestOutcome)
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


def _in_background(fn: Callable[[], None]) -> object:
    """Start `fn` on a runner thread (large stack) and return at once."""
    with _RUNNERS_LOCK:
        previous = threading.stack_size(_THREAD_STACK_BYTES)
        try:
            return _RUNNERS.submit(fn)
        finally:
            threading.stack_size(previous)


# One ready instance per key: a second one bought nothing more (docs/benchmarks.md).
_POOL = _pool.InstancePool(_in_background, size=1)


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

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def next_check(self) -> int | None:
        """Epoch ticks until the run's next check, or None to end it now (cancelled or
        out of time); called by `_interrupt` on the run's thread."""
        remaining = self.remaining_s()
        if self.cancel.is_set() or remaining <= 0:
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
        for call in request.calls:      # the guest checks these too, but a program can bypass it
            if len(call.args) > limits.request_bytes:
                raise _Trip(HostDispatchFailed(
                    message=f"the arguments of sub-call {call.id} are {len(call.args)} bytes "
                            f"of JSON, over the limit of {limits.request_bytes} bytes"))
            msgspec.json.decode(call.args)          # numbers in range, nesting the host decodes
    except (msgspec.DecodeError, RecursionError) as exc:
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
        raise _Trip(HostDispatchFailed(
            message=f"the dispatcher's reply is malformed: {exc}")) from None
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

    #: What programs may import: the guest's own list (`cm_guest.runtime.ALLOWED_MODULES`).
    allowed_modules: frozenset[str] = guest_runtime.ALLOWED_MODULES

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
        fresh = _POOL.take(runtime, limits.memory_bytes)   # never run in; see _pool.py
        store = fresh.store
        try:
            if limits.fuel is not None:
                store.set_fuel(limits.fuel)
            _TICKER.catch_up()
            _interrupt.install(store, run.next_check)
            _local.run = run
            started = time.monotonic()
            try:
                run_func = fresh.run_func or _pool.instantiate(runtime, store)
                reply = run_func(store, guest_request)
            except _Trip as trip:
                return self._ended(run, store, started, trip.error)
            except wasmtime.WasmtimeError as exc:
                return self._ended(run, store, started, self._explain_trap(run, store, exc))
            finally:
                _local.run = None
                _interrupt.uninstall()
            return self._decode(run, store, started, reply)
        finally:
            _POOL.retire(store)                 # closed in the background

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
        # No limit explains it: most often native recursion exhausted the wasm stack, or
        # C code aborted on an allocation that failed near the memory limit.
        frames = [line.strip() for line in str(exc).splitlines()[1:] if "!" in line][:3]
        where = f" in {' <- '.join(f.split('!', 1)[1] for f in frames)}" if frames else ""
        return GuestCrashed(message="the sandbox instance trapped (wasm stack or memory "
                                    f"exhausted in native code){where}")

    def _decode(self, run: _Run, store: wasmtime.Store, started: float,
                reply: str) -> RunOutcome:
        """The outcome from the guest's reply, validated: a malformed reply is `GuestCrashed`;
        output or a result over the limits (which the guest enforces, unless the program
        tampered with it) is cut here and reported as `OutputLimitExceeded`."""
        limits = run.limits
        try:
            data = _OUTCOME_DECODER.decode(reply)
        except (msgspec.DecodeError, RecursionError) as exc:
            return self._ended(run, store, started, GuestCrashed(
                message=f"the sandbox returned a malformed outcome: {exc}"))
        error: AnyRunError | None = None
        raw_error = data.error
        status = data.status
        if status == "limit":
            message = raw_error.message if raw_error else str(data.limit)
            if data.limit == "memory":
                error = MemoryLimitExceeded(message=message)
            elif data.limit == "output":
                error = OutputLimitExceeded(message=message)
            elif data.limit == "subcalls":
                error = SubcallLimitExceeded(message=message)
            else:
                error = GuestCrashed(message=message)
        elif status == "error":
            error = (ProgramError(type=raw_error.type, message=raw_error.message,
                                  traceback=raw_error.traceback) if raw_error is not None
                     else GuestCrashed(message="the sandbox reported an error without details"))
        stdout, stdout_cut = _capped(data.stdout, limits.output_bytes, "stdout")
        stderr, stderr_cut = _capped(data.stderr, limits.output_bytes, "stderr")
        value = data.value
        cut = [name for name, was_cut in (("stdout", stdout_cut), ("stderr", stderr_cut))
               if was_cut]
        if cut or len(reply) > limits.result_bytes:
            status, value = "limit", UNSET
            if not isinstance(error, OutputLimitExceeded):
                error = OutputLimitExceeded(message=(
                    f"{cut[0]} exceeded {limits.output_bytes} bytes" if cut else
                    f"the run's result is {len(reply)} characters, over the limit of "
                    f"{limits.result_bytes}"))
        return RunOutcome(
            status=status, stdout=stdout, stderr=stderr, value=value,
            value_repr=data.value_repr and value is not UNSET, error=error,
            duration_s=time.monotonic() - started, subcalls=run.subcalls,
            fuel_used=self._fuel_used(run, store))


def _capped(text: str, limit_bytes: int, name: str) -> tuple[str, bool]:
    """`text` as the guest sent it, or cut to `limit_bytes` of UTF-8 with a marker when it
    is longer than that plus the guest's own marker; True when cut."""
    if len(text) * 4 <= limit_bytes + _MARKER_BYTES:      # at most 4 bytes per character
        return text, False
    encoded = text.encode("utf-8")
    if len(encoded) <= limit_bytes + _MARKER_BYTES:
        return text, False
    kept = encoded[:limit_bytes].decode("utf-8", "ignore")
    return kept + f"\n[... {name} truncated at {limit_bytes} bytes]\n", True
