"""`RestrictedSandbox`: programs run in this process under RestrictedPython (docs/design.md §3,
Tiers).

This tier is WEAKER than `WasmSandbox`. Use it for trusted code and for comparing policies,
never for untrusted programs:

- It shares the host process: the program runs on a thread of the host's interpreter, beside
  the host's modules, objects and secrets. What keeps them apart is a compile-time rewrite of
  the program (RestrictedPython) and runtime guards, not an isolation boundary; a gap in
  either is an escape into the host.
- Memory is not isolated. Single operations that would obviously allocate more than
  `limits.memory_bytes` (`'x' * 10**10`, `s + s`, `10**10**9`, `1 << 10**10`) are refused, and
  growth of the whole process's resident memory by more than `memory_bytes` during the run
  ends it; anything else (a huge allocation inside C code, a bomb decompressed by `zlib`)
  reaches the host's allocator. Concurrent runs share that process-wide measure.
- CPU limits are best-effort. The wall clock is checked at every loop iteration, function
  entry, exception handler and `finally` block of the program, and a watchdog then injects
  an exception into the worker thread (`PyThreadState_SetAsyncExc`). Neither can interrupt
  one long C call (huge integer arithmetic, a catastrophic regular expression): it holds the
  GIL, so the host waits for it too. The caller's thread otherwise returns by about twice the
  wall-clock limit; a worker that is still running then is left behind as a daemon thread.
- No fuel metering (`limits.fuel` is ignored), no `stack_bytes` (Python's recursion limit
  applies), no `max_concurrent_subcalls` (the dispatcher applies it).
- No recording or replay of clocks and randomness: `RunRequest.tape` is ignored and
  `RunOutcome.tape` is None (the program reads the host's own clocks).

What matches `WasmSandbox` (the guest runtime's own code is reused: `sandbox/guest/cm_guest`):
the namespace (tools by alias, `tools`, `call_tool(name, /, **kwargs)`, the `ToolCallError`
family), call-shape `TypeError`s, the JSON-only argument check, the sub-call wire format and
budget, the final-expression value, capped output with its marker, tracebacks of program
lines only, typed outcomes. Top-level `await`, `async def`, `asyncio.run`, `gather`,
`TaskGroup` and awaited tool calls work (on a per-run event loop on the worker thread whose
idle step sends pending tool calls as one batch, as in the guest).

What differs, on purpose or because RestrictedPython refuses it:

- Imports: a short list of pure-computation modules (`ALLOWED_MODULES`), not the guest's
  whole standard library: `sys`, `os`, `pathlib`, `logging`, `importlib`, `threading`,
  `gc`, `weakref`, `zoneinfo` and the rest would hand out the host; every module arrives
  as a read-only view whose members are filtered (no submodules off the list, no `io.open`,
  no `string.Formatter`, no `typing.get_type_hints` or `functools.singledispatch` (both
  `eval` annotations), no setters of process-wide state such as `csv.register_dialect` or
  `warnings.simplefilter`); `random` is a fresh generator per run; `time.sleep` and the
  asyncio loop are bounded by the run.
- Attributes whose name starts with `_` (`__class__`, `__globals__`, `super().__init__`),
  frame/code/traceback attributes, `str.format`/`format_map`, `type(name, bases, dict)`,
  `match`, `except*`, `nonlocal`, `eval`/`exec`/`open`, and methods named like dunders other
  than `__init__`, comparisons and `__contains__` are refused, most at compile time (a
  `SyntaxError` naming the rule).
- Writes go only to the program's own objects (instances of classes it defined, its
  functions) and to plain containers; attribute writes on anything else raise `TypeError`.
  A container held by a class the program did not define arrives as a per-run copy.
- State the whole interpreter shares is out of reach: `register` of an ABC the program did
  not define, a library function's `cache_info`/`cache_clear`, `abc.get_cache_token`
  (`_restricted_guards._shared_state`).
- No `sys.stdout`: `print` writes to the captured stdout; stderr carries `warnings.warn`.

This module runs a program: the worker thread, its watchdog (deadline, process memory,
cancellation, the injected stop) and the outcome. What it runs the program with is in
`_restricted_policy.py` (the compile step), `_restricted_run.py` (one run's state and event
loop), `_restricted_modules.py` (what a program may import, as views) and
`_restricted_guards.py` (the guards and builtins).
"""

from __future__ import annotations

import contextlib
import linecache
import os
import threading
import time
from typing import Any

import msgspec

from ._capture import OnOutput
from ._host import GuestOutcome, decode_guest, outcome, refused_as_too_large
from ._protocol import AnyRunError, Dispatch, RunOutcome, RunRequest, TimeLimitExceeded
from ._restricted_guards import _program_builtins
from ._restricted_modules import ALLOWED_MODULES, _Modules
from ._restricted_policy import PROGRAM, _compile
from ._restricted_run import _Run, _Stop
from .guest.cm_guest import runtime

_POLL_S = 0.02            # watchdog period
_REINJECT_S = 0.1         # after a stop, how often it is injected again until the worker ends
_LATE_REAPER_S = 60.0     # how long an abandoned worker keeps being stopped
# Limits after which a worker still running program code has a stop injected (after a
# grace period): the run must end even where program code does not tick.
_INJECTED_LIMITS = frozenset({"timeout", "abort", "memory", "paused"})


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _rss_bytes() -> int | None:
    """Resident memory of the whole process (Linux), or None where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


_LINECACHE_LOCK = threading.Lock()
_STACK_SIZE_LOCK = threading.Lock()
# Nested C iterators (`itertools.chain(itertools.chain(...))`) recurse on the native stack
# without Python's recursion check; a worker stack this large (address space, not memory)
# outlasts what the memory limits let a program build, instead of overflowing the process.
_THREAD_STACK_BYTES = 1 << 30


def _execute(run: _Run, request: RunRequest) -> None:
    """The worker thread: compile and run the program, then turn its error or value into
    plain data (`run.result`) and drop the program's objects, all here: freeing a deeply
    nested structure recurses on this thread's large stack, not on the caller's."""
    run.ident = threading.get_ident()
    ns: dict[str, Any] = {}
    try:
        try:
            modules = _Modules(run)
            code, has_value, run.bridge.callsites = _compile(request.code)
            ns = runtime._namespace(run.bridge, [msgspec.to_builtins(t) for t in request.tools],
                                    run.out.write)
            ns["__builtins__"] = _program_builtins(run, modules, set())
            if code.co_flags & 0x80:       # CO_COROUTINE: top-level await
                modules.asyncio_run(eval(code, ns))
            else:
                exec(code, ns)
            value = run.bridge.finish(ns.get(runtime.VALUE_SLOT))
            runtime._warn_unused(run.bridge, run.err)
            if has_value:
                run.has_value = True
                run.value = value
        except BaseException as exc:
            run.error = exc
        run.finish()
    except BaseException as exc:           # a stop that landed between the program and finish
        run.error = run.error or exc
        run.finish()
    finally:
        run.over = True
        try:
            for stream in (run.out, run.err):
                with contextlib.suppress(BaseException):
                    stream.flush()
            run.result = _result(run, request.code)
        finally:
            run.error = run.value = None
            with contextlib.suppress(BaseException):
                ns.clear()


def _result(run: _Run, source: str) -> dict[str, Any]:
    """The guest's outcome shape for the program's own ending (limits are added later)."""
    exc = run.error
    if isinstance(exc, MemoryError):
        run.state.trip("memory", runtime.memory_message(run.limits.for_guest()))
    if isinstance(exc, _Stop):
        run.trip_time_up()
    if exc is not None:
        with _LINECACHE_LOCK:              # process-wide; the traceback reads it
            linecache.cache[PROGRAM] = (len(source), None, source.splitlines(True), PROGRAM)
            try:
                error = runtime._error(exc)
            finally:
                linecache.cache.pop(PROGRAM, None)
        return {"status": "error", "error": error}
    outcome: dict[str, Any] = {"status": "ok"}
    if run.has_value:
        runtime.finish_value(outcome, run.state, run.value, run.limits.output_cap_bytes)
    return outcome


class RestrictedSandbox:
    """Runs programs in this process, compiled by RestrictedPython (docs/design.md §3, Tiers).

    WEAKER than `WasmSandbox` (see this module's docstring and docs/security.md, "The
    restricted tier"): it shares the host process, memory is not isolated, and CPU limits
    are best-effort. For trusted code only; `RestrictedProcessSandbox` (`_worker_host.py`)
    runs this tier in a supervised worker process, where C-level work cannot hold or grow
    the host.
    """

    #: The modules a program may import here (`_restricted_modules.ALLOWED_MODULES`).
    allowed_modules: frozenset[str] = ALLOWED_MODULES

    def __init__(self, thread_stack_bytes: int = _THREAD_STACK_BYTES) -> None:
        """Args:
            thread_stack_bytes: the run thread's stack (address space; see
                `_THREAD_STACK_BYTES`). A worker process under an address-space limit
                uses less, and a native stack overflow then ends only that process.
        """
        self.thread_stack_bytes = thread_stack_bytes

    def run(self, request: RunRequest, dispatch: Dispatch,
            cancel: threading.Event | None = None, *,
            on_output: OnOutput | None = None) -> RunOutcome:
        """Run one program on a fresh worker thread and report how it ended.

        Args:
            request: source text, tool specs, limits (`fuel`, `stack_bytes` and
                `max_concurrent_subcalls` are not applied by this tier; nor is `tape`:
                the program reads the host's own clocks and randomness, so nothing is
                recorded or replayed and `outcome.tape` is None).
            dispatch: called on the worker thread per sub-call batch (a `SubCallBatch`;
                it returns a `SubCallReply`).
            cancel: set it from any thread to stop the run (`RunAborted`).
            on_output: called with each piece of stdout and stderr as the program writes
                it, on the run's thread (`sandbox.OnOutput`).
        Returns:
            The outcome; a tripped limit is a typed `error`, never an exception. The caller's
            thread returns within about 2x `limits.wall_clock_s` unless the worker holds the
            GIL in one long C call.
        """
        refused = refused_as_too_large(request.code, request.limits)
        if refused is not None:
            return refused
        run = _Run(request.limits, dispatch, cancel, on_output)
        worker = threading.Thread(target=_execute, args=(run, request), daemon=True,
                                  name="codemode-restricted-run")
        with _STACK_SIZE_LOCK:
            previous = threading.stack_size(self.thread_stack_bytes)
            try:
                worker.start()
            finally:
                threading.stack_size(previous)
        abandoned = self._watch(run, worker)
        return self._outcome(run, request, abandoned)

    def _watch(self, run: _Run, worker: threading.Thread) -> bool:
        """Wait for the worker, enforcing time, memory and cancel; True if it was left."""
        limits = run.limits
        baseline = _rss_bytes()
        hard = run.started + max(2 * limits.wall_clock_s, limits.wall_clock_s + 0.5)
        last_injection = 0.0
        # Program code notices a stop at its next `_tick_()`; injecting at once would land
        # in host code it calls (the event loop, the bridge) more often than needed.
        grace = min(0.25 * limits.wall_clock_s, 0.5)
        stopped_at: float | None = None
        while True:
            worker.join(_POLL_S)
            if not worker.is_alive():
                return False
            now = time.monotonic()
            if run.cancel.is_set():
                run.state.trip("abort", "the run was cancelled")
            elif now >= run.deadline:
                run.trip_time_up()
            elif baseline is not None:
                rss = _rss_bytes()
                if rss is not None and rss - baseline > limits.memory_bytes:
                    run.state.trip("memory", "the process grew by more than the run's "
                                             f"memory limit of {limits.memory_bytes} bytes")
            if stopped_at is None and run.state.limit is not None:
                stopped_at = now
            if run.state.limit in _INJECTED_LIMITS and stopped_at is not None \
                    and now - stopped_at >= grace and now - last_injection >= _REINJECT_S:
                run.inject()
                last_injection = now
            if now >= hard:
                threading.Thread(target=self._reap, args=(run, worker), daemon=True,
                                 name="codemode-restricted-reaper").start()
                return True

    @staticmethod
    def _reap(run: _Run, worker: threading.Thread) -> None:
        until = time.monotonic() + _LATE_REAPER_S
        while worker.is_alive() and time.monotonic() < until:
            run.inject()
            worker.join(_REINJECT_S * 5)

    def _outcome(self, run: _Run, request: RunRequest, abandoned: bool) -> RunOutcome:
        duration = time.monotonic() - run.started
        ended: GuestOutcome | AnyRunError
        if abandoned:
            run.trip_time_up()
            ended = TimeLimitExceeded(
                message=f"{run.state.limit_message}; the worker thread could not be stopped "
                        "and was left running")
        else:
            data: dict[str, Any] = dict(run.result or {
                "status": "error", "error": {"type": "RuntimeError", "traceback": "",
                                             "message": "the run ended without a result"}})
            runtime.apply_limit(data, run.state)
            ended = decode_guest(runtime.encode_outcome(data, request.limits.result_bytes))
        return outcome(run, ended, duration_s=duration)
