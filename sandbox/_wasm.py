"""`WasmSandbox`: one fresh wasmtime Store and instance per run (docs/design.md §3)."""

from __future__ import annotations

import _thread
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import wasmtime

from . import _component, _interrupt, _pool, _runner
from ._capture import OnOutput
from ._host import GuestOutcome, HostStop, RunHost, decode_guest, outcome, refused_as_too_large
from ._limits import SandboxLimits
from ._protocol import (
    AnyRunError,
    Dispatch,
    FuelExhausted,
    GuestCrashed,
    HostDispatchFailed,
    ParamSpec,
    RunOutcome,
    RunRequest,
    Tape,
    ToolSpec,
)
from ._ticker import EpochTicker
from .guest.cm_guest.modules import AVAILABLE as AVAILABLE_MODULES

if TYPE_CHECKING:
    import concurrent.futures

    from ._tape import TapeRecorder

_REQUEST_ENCODER = msgspec.json.Encoder()
_IMMUTABLE = (str, int, float, bool, type(None), msgspec.UnsetType)
_TOOLS_KEPT = 8
_encoded_tools: dict[int, tuple[tuple[ToolSpec, ...], bytes]] = {}
# Each tick may start the pool's background (`InstancePool.tick`): the pool looked up at
# the tick, so a pool put in its place is the one ticked.
_TICKER = EpochTicker(_component.engines, on_tick=lambda: _tick_pool())
_RUNNERS = _runner.Runners("codemode-run")

_T = TypeVar("_T")


_submitted = threading.local()     # `ready`: this runner thread's job is a submitted run


def _on_runner_thread(fn: Callable[..., _T], *args: Any) -> _T:
    """`fn(*args)` on a runner thread (its stack large enough for wasm: `_runner`); its
    exception, if any, re-raised here. Called by a run `WasmSandbox.submit` already put on
    a runner thread, it runs here (once: a run nested in that run's dispatch goes to a
    thread of its own)."""
    if getattr(_submitted, "ready", False):
        _submitted.ready = False
        return fn(*args)
    return _RUNNERS.call(fn, *args)


_background_started = False


def _in_background(fn: Callable[[], None]) -> object:
    """Start `fn` on a runner thread and return at once. The first time, no runner is idle
    (the caller is a run on the only one) and starting one waits until it runs, which is
    left to a short-lived thread of its own, off the path of a process's first run."""
    global _background_started
    if _background_started:
        _RUNNERS.start_background(fn)
    else:
        _background_started = True
        _thread.start_new_thread(_RUNNERS.start_background, (fn,))
    return None


# Instances made ahead of their run (`_pool`): one ready per key, prepared and torn down in
# the background.
POOL = _pool.InstancePool(_in_background, size=1)


def _tick_pool() -> None:
    POOL.tick()


def _tools_json(tools: tuple[ToolSpec, ...]) -> bytes:
    """`tools` as JSON, kept for the runs given the same tuple (`CodeMode` gives each run
    the same tuple while its tools stay the same): frozen specs whose defaults are
    immutable cannot change, so their text is encoded once (~4 of a request's ~5 us)."""
    kept = _encoded_tools.get(id(tools))
    if kept is not None and kept[0] is tools:
        return kept[1]
    encoded = _REQUEST_ENCODER.encode(tools)
    if type(tools) is tuple and all(
            type(spec) is ToolSpec and type(spec.params) is tuple
            and all(type(p) is ParamSpec and type(p.default) in _IMMUTABLE for p in spec.params)
            for spec in tools):
        if len(_encoded_tools) >= _TOOLS_KEPT:     # (runs on several threads: no iteration)
            _encoded_tools.clear()
        _encoded_tools[id(tools)] = (tools, encoded)     # the tuple kept: its id not reused
    return encoded


class _Run(RunHost):
    """A run's host state (`RunHost`) plus the epoch-deadline verdict of the wasm tier and,
    for a request with a tape, the recorder its clock and random reads go through."""

    def __init__(self, limits: SandboxLimits, dispatch: Dispatch,
                 cancel: threading.Event | None, tape: Tape | None = None,
                 on_output: OnOutput | None = None) -> None:
        super().__init__(limits, dispatch, cancel, on_output)
        if tape is not None:   # a run without a tape never loads the recorder
            from ._tape import TapeRecorder

            self.tape = TapeRecorder(tape)

    def recorder(self) -> TapeRecorder:
        """Raises:
            HostStop: the run has no tape (its instance should not have been linked to
                the recording functions)."""
        if self.tape is None:
            raise HostStop(GuestCrashed(message="a recording host function was called in a "
                                                "run without a tape"))
        return self.tape

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
    try:
        _current().sleep(seconds)
    except ValueError as exc:     # a program calling the raw import: its value, typed
        raise HostStop(HostDispatchFailed(
            message=f"the program called host.sleep({seconds!r}): {exc}")) from None


# The recording linker's WASI clocks and randomness (`_component.Shadows`), for runs with a
# tape (`_tape.TapeRecorder`).

class _Datetime(msgspec.Struct, frozen=True):   # not a dataclass: see _component.EngineConfig
    """A `wasi:clocks/wall-clock.datetime` record (wasmtime-py reads its fields by name)."""

    seconds: int
    nanoseconds: int


def _wall_now(_store: Any) -> _Datetime:
    return _Datetime(*_current().recorder().wall_clock())


def _wall_resolution(_store: Any) -> _Datetime:
    return _Datetime(0, 1)


def _monotonic_now(_store: Any) -> int:
    return _current().recorder().monotonic()


def _monotonic_resolution(_store: Any) -> int:
    return 1


def _no_pollable(_store: Any, _when: int) -> None:
    # The guest sleeps through the host (`time.sleep`, its event loop's idle step); a
    # pollable on a clock is a wait the deadline could not interrupt.
    raise HostStop(GuestCrashed(
        message="the program waited on a WASI clock pollable, which a recorded run does "
                "not offer"))


def _random_bytes(_store: Any, nbytes: int) -> bytes:
    return _current().recorder().random_bytes(nbytes)


def _random_u64(_store: Any) -> int:
    return _current().recorder().random_u64()


_SHADOWS: _component.Shadows = {
    "wasi:clocks/wall-clock": {"now": _wall_now, "resolution": _wall_resolution},
    "wasi:clocks/monotonic-clock": {
        "now": _monotonic_now, "resolution": _monotonic_resolution,
        "subscribe-instant": _no_pollable, "subscribe-duration": _no_pollable},
    "wasi:random/random": {"get-random-bytes": _random_bytes,
                           "get-random-u64": _random_u64},
}


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
            cancel: threading.Event | None = None, *,
            on_output: OnOutput | None = None) -> RunOutcome:
        """Run one program and report how it ended (docs/design.md §3).

        Args:
            request: source text, tool specs, limits, and the tape to replay and record
                the run's clock and random reads on (None: nothing recorded, at no cost;
                see docs/sandbox.md, "Recording and replaying clocks and randomness").
            dispatch: called on the run's thread per sub-call batch (a `SubCallBatch`;
                it returns a `SubCallReply`); it may raise `PauseRun` to end the run with
                status "paused".
            cancel: set it from any thread to stop the run at its next host call (sub-call
                or sleep); running wasm is stopped by the wall-clock deadline.
            on_output: called with each piece of stdout and stderr as the program writes
                it, on the process's output reader thread (`sandbox.OnOutput`): what a
                run printed reaches it even when the run is stopped.
        Returns:
            The outcome; a tripped limit is a typed `error`, never an exception. With a
            tape, `outcome.tape` holds every clock and random read of the run.
        Raises:
            SandboxUnavailable: the component could not be built or loaded.
        """
        refused = refused_as_too_large(request.code, request.limits)
        if refused is not None:
            return refused
        return _on_runner_thread(self._run_here, self._runtime(request), request, dispatch,
                                 cancel, on_output)

    def submit(self, request: RunRequest, dispatch: Dispatch,
               cancel: threading.Event | None = None, *,
               on_output: OnOutput | None = None
               ) -> concurrent.futures.Future[RunOutcome]:
        """`run` started on a runner thread; returns at once. The future holds what
        `run` returns or raises (`SandboxUnavailable`). For callers that wait without a
        thread of their own (an event loop: `asyncio.wrap_future`); a subclass's `run` is
        what runs."""
        def submitted() -> RunOutcome:
            _submitted.ready = True
            try:
                if on_output is None:       # a subclass's `run` may not take it
                    return self.run(request, dispatch, cancel)
                return self.run(request, dispatch, cancel, on_output=on_output)
            finally:
                _submitted.ready = False
        return _RUNNERS.submit(submitted)

    def _runtime(self, request: RunRequest) -> _component.Runtime:
        """Raises:
            SandboxUnavailable: the component could not be built or loaded."""
        limits = request.limits
        config = _component.EngineConfig(fuel=limits.fuel is not None,
                                         stack_bytes=limits.stack_bytes)
        runtime = _component.runtime_for(config, _host_dispatch, _host_sleep, _SHADOWS)
        _TICKER.ensure_started()
        return runtime

    def _run_here(self, runtime: _component.Runtime, request: RunRequest, dispatch: Dispatch,
                  cancel: threading.Event | None, on_output: OnOutput | None) -> RunOutcome:
        limits = request.limits
        tools = _tools_json(request.tools)
        run = _Run(limits, dispatch, cancel, request.tape, on_output)
        # A made-ahead instance serves an unrecorded run (its warm-up already read the
        # clocks and randomness, unrecorded); a recorded one is instantiated on its path,
        # through the recording Linker, so that every read is on its tape.
        recorded = request.tape is not None
        fresh = None if recorded else POOL.take(runtime, limits.memory_bytes, tools)
        fresh = fresh or _pool.Fresh.new(runtime, limits.memory_bytes)
        fields: dict[str, Any] = {"code": request.code, "limits": limits.for_guest()}
        if fresh.tools == tools:   # prepared with these very tools: their bindings are made
            fields["tools_prepared"] = True
        else:
            fields["tools"] = msgspec.Raw(tools)
        guest_request = _REQUEST_ENCODER.encode(fields).decode()
        store = fresh.store
        ended: GuestOutcome | AnyRunError
        try:
            fresh.output.bind(run.stdout, run.stderr)
            if limits.fuel is not None:
                store.set_fuel(limits.fuel)
            _TICKER.catch_up()
            _interrupt.install(store, run.next_check)
            _local.run = run
            started = time.monotonic()
            try:
                if fresh.func is None:
                    fresh.instantiate(runtime.recording_linker if recorded else None)
                ended = decode_guest(fresh.call(guest_request))
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
        frames = [line.strip() for line in str(exc).splitlines()[1:] if "!" in line][:3]
        where = f" in {' <- '.join(f.split('!', 1)[1] for f in frames)}" if frames else ""
        text = str(exc)
        if "call_import" in text and "panic" in text:
            # The guest's bindings panic on a host import given a value its WIT type cannot
            # carry (an int, None, bytes, a str with a lone surrogate for a string).
            return GuestCrashed(message="the program called a host import with a value its "
                                        "type cannot carry, and the guest's bindings aborted")
        # No limit explains it: native recursion exhausted the wasm stack (freeing a
        # structure nested hundreds of thousands deep), or C code aborted on an allocation
        # that failed near the memory limit.
        return GuestCrashed(message="the sandbox instance trapped (wasm stack or memory "
                                    f"exhausted in native code){where}")
