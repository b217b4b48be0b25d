"""Where the time of one sub-call and of one fresh run goes, part by part, beside the totals.

    python -m benchmarks.breakdown [--runs 200] [--subcalls 500] [--first [--spawns 9]]

Each part is timed in place: the benchmark wraps the functions that do it (the host's batch
handling, the dispatcher, each pipeline stage, the pool's steps, the guest call) with a
timer for the length of the measurement, so a part is what that code costs inside a real
run, on this machine, now. The totals are measured the way `benchmarks.run` measures them
(the rows share its code), and Monty's, when it is installed, in the same process right
after, as the baseline of the ratios.

One sub-call, from a program making `--subcalls` calls of `add(a=i, b=1)` through
`run_code` (and `echo(value=i)` to the bare sandbox), per call, in microseconds:

- bare bridge: the bare sandbox's sub-call (the guest's bridge, the WIT crossing, the host's
  decoding and checks, an echo host), split into the host's part (`RunHost.dispatch_batch`
  around the echo) and the guest's with the crossing (the rest); that rest split again, in
  a second run whose request asks the guest to time its own parts (`cm_guest/profile.py`):
  the crossing (the guest's `dispatch` import less the host's part), the guest's encoding
  of the arguments and decoding of the reply, and the rest of its bridge (the binding, its
  checks and bookkeeping: the guest's whole part less the timed ones; the timers' own cost,
  shown by that run's total, lands mostly in the timed parts); and two floors, from a
  program calling the raw `dispatch` import (no binding, no JSON in the guest), answered
  by a constant in place of the host's batch handling (the crossing alone) and by the
  host itself;
- the same through `run_code`: the host's part; the dispatcher's round trip to the event
  loop (`SubCallDispatcher.dispatch`), split into each pipeline stage (S3 `prepare`,
  S4-S7 `start`, S8-S10 `dispatch`, S11-S14 `commit`), the dispatch events (on start, on
  commit), the scheduler's and the dispatcher's own work around them (the rest of the
  batch's service on the loop, `SubCallDispatcher._serve`), and the two thread hand-offs
  with the event-loop turn that serves the batch (the rest of the round trip);
- per sub-call, for each: the memory blocks it leaves allocated (`sys.getallocatedblocks()`
  after the program, less before, over `--subcalls`: what the run's record, the scheduler
  and the session log keep of every call) and the time the garbage collector took (all
  generations, `gc.callbacks`), which the objects a call allocates and keeps drive.

One fresh run of `x = 1`, in milliseconds, back to back (every run makes its own instance)
and paced 20 ms apart (the pool's case: an instance made and prepared ahead): making the
Store, instantiating, the guest's `run` (its program and the crossing; below it, the phases
the guest times itself in a second pass of up to 50 runs: compiling, the program's globals,
running it, and the rest), the host's own glue around them, retiring the instance; minor
page faults of the run's thread per run (`getrusage(RUSAGE_THREAD)`: memory the instance
touches for the first time) and the process's CPU per run (all threads, background work
included); and `run_code`'s total beside the bare sandbox's and beside the bare sandbox
given `run_code`'s tool specs (what binding the tools costs the guest), split into its host
parts, each timed in place on the event loop's thread: the session events it logs
(`turn/start`, `step/start`, `tool/call`, `tool/result`, `step/end`, `turn/end`), the batch
and call setup (parsing the call, the scheduler, S3-S7), the run's setup (exposed tools,
stubs and specs, the dispatcher, the labels' flow), handing the run to its runner thread,
the outcome (the dispatcher's drain, the value, S9's render and snapshot), the commit
(S11-S14), the sandbox run itself on its runner thread, and the rest (event-loop turns,
tasks, thread wake-ups), with two parts of that rest timed in place (`wakes`): waking the
runner thread (from the run handed to it to the run's first statement there) and waking the
loop (from the run's end, scheduled from the runner thread, to the loop's callback); and a
floor: one governed direct call of the toolset's `add` through the same session (its turn,
step, call and result events; no sandbox), less the peer's own loop start and stop, run
beside each `run_code` run with the same pause and the same timers in place (not counting
it): what governing the `run_code` call itself costs at least.

With `--first`, instead: the first result in a new process (`benchmarks.run`'s row, the same
programs), per peer (`sandbox`, `run_code`), in milliseconds, median of `--spawns` new
interpreters with the bytecode cache filled (`run.interpreter_env`): the interpreter's own
start (spawn to the first statement, `site` and its import hooks included); importing the
third-party libraries the first result needs (wasmtime, msgspec; asyncio for `run_code`);
importing codemode's own modules; for `run_code`, making the `Session` and `CodeMode` (tool
registration); loading the runtime (the Engine, the compiled component deserialized from the
disk cache, the Linker); the first run's parts (Store and WASI context, instantiation, the
guest's `run`, retiring the instance) and its rest; and the interpreter's exit.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import inspect
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from . import _peers
from . import run as bench

Totals = defaultdict[str, float]


@contextmanager
def timing(targets: list[tuple[Any, str, str]],
           counts: Callable[..., bool] = lambda *args: True) -> Iterator[Totals]:
    """While active, each `(owner, attribute, part)` function adds its seconds to
    `totals[part]` (async functions: from the call to their completion), when
    `counts(*args)` says so for the call's arguments."""
    totals: Totals = defaultdict(float)
    saved = []
    for owner, name, part in targets:
        original = getattr(owner, name)
        saved.append((owner, name, original))
        setattr(owner, name, _timed(original, part, totals, counts))
    try:
        yield totals
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


@contextmanager
def wakes(loop: asyncio.AbstractEventLoop, counts: Callable[[], bool]) -> Iterator[Totals]:
    """While active, the two thread wake-ups of a run, timed in place when `counts()` says so
    at the hand-off, in `totals`: "runner" sums the seconds from a job handed to a runner
    thread (`Runners._hand`) by the thread that entered `wakes` (the loop's: not, say, the
    pool's refill started from the epoch ticker) to that job's first statement on it,
    "loop" from a callback scheduled from another thread (`loop.call_soon_threadsafe`) to
    its first statement on the loop; "runner wakes" and "loop wakes" count them."""
    from codemode.sandbox import _runner

    totals: Totals = defaultdict(float)
    hand, call_soon_threadsafe = _runner.Runners._hand, loop.call_soon_threadsafe
    owner = threading.get_ident()

    def timed_hand(self: Any, job: Any) -> None:
        if not counts() or threading.get_ident() != owner:
            return hand(self, job)
        handed = time.perf_counter()

        def started() -> Any:
            totals["runner"] += time.perf_counter() - handed
            totals["runner wakes"] += 1
            return job()
        return hand(self, started)

    def timed_call_soon_threadsafe(callback: Any, *args: Any, **kwargs: Any) -> Any:
        if not counts():
            return call_soon_threadsafe(callback, *args, **kwargs)
        scheduled = time.perf_counter()

        def started(*args: Any) -> Any:
            totals["loop"] += time.perf_counter() - scheduled
            totals["loop wakes"] += 1
            return callback(*args)
        return call_soon_threadsafe(started, *args, **kwargs)

    _runner.Runners._hand = timed_hand                      # type: ignore[method-assign]
    loop.call_soon_threadsafe = timed_call_soon_threadsafe  # type: ignore[method-assign]
    try:
        yield totals
    finally:
        _runner.Runners._hand = hand                        # type: ignore[method-assign]
        del loop.call_soon_threadsafe                       # the class's own again


def _timed(fn: Callable[..., Any], part: str, totals: Totals,
           counts: Callable[..., bool] = lambda *args: True) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            if not counts(*args):
                return await fn(*args, **kwargs)
            started = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                totals[part] += time.perf_counter() - started
        return timed_async

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        if not counts(*args):
            return fn(*args, **kwargs)
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[part] += time.perf_counter() - started
    return timed


def _subcall_program(peer: _peers.Peer, n: int) -> str:
    return f"for i in range({n}):\n    {_peers.CALL[peer.name]}\n0"


def _instrumented(peer: _peers.Peer, n: int, targets: list[tuple[Any, str, str]],
                  subcall_targets: list[tuple[Any, str, str]] = ()  # type: ignore[assignment]
                  ) -> tuple[float, dict[str, float]]:
    """Microseconds per sub-call: the net total and each part, from the fastest of 3 runs
    of the sub-call program (its parts timed in that same run), net of the same loop
    without calls (best of 3)."""
    base = min(bench._timed(lambda: peer.run(f"for i in range({n}):\n    pass\n0"))
               for _ in range(3))
    best: tuple[float, dict[str, float]] | None = None
    for _ in range(3):
        with timing(targets) as totals, timing(list(subcall_targets), _is_subcall) as more:
            wall = bench._timed(lambda: peer.run(_subcall_program(peer, n)))
        if best is None or wall < best[0]:
            best = (wall, {**totals, **more})
    assert best is not None
    return (best[0] - base) / n * 1e6, {k: v / n * 1e6 for k, v in best[1].items()}


def subcall_parts(sandbox: _peers.Peer, run_code: _peers.Peer, n: int) -> dict[str, float]:
    """Microseconds per sub-call of each part (see the module docstring)."""
    from codemode._run import dispatch as _dispatch
    from codemode.pipeline import _admission, _commit, _session
    from codemode.pipeline import _dispatch as _dispatch_phase
    from codemode.sandbox import _host

    parts: dict[str, float] = {}
    bare, per = _instrumented(sandbox, n, [(_host.RunHost, "dispatch_batch", "host")])
    parts["bare bridge, total"] = bare
    parts["  host: decode, checks, encode, echo (json)"] = per["host"]
    parts["  guest bridge and WIT crossing"] = bare - per["host"]
    timed, guest, host = _guest_profiled(sandbox, n)
    crossing = guest["dispatch"] - host
    parts["    WIT crossing (wasmtime glue, lift, lower)"] = crossing
    parts["    guest: check and encode the arguments"] = guest["encode"]
    parts["    guest: decode the reply"] = guest["decode"]
    parts["    guest: the rest (binding, bookkeeping)"] = (
        bare - per["host"] - crossing - guest["encode"] - guest["decode"])
    parts["    (total with the guest's timers on)"] = timed
    alone, through_host = crossing_floor(sandbox, n)
    parts["  floor: raw import, a constant answer"] = alone
    parts["  floor: raw import, through the host"] = through_host
    stages = [(_session.Session, "prepare", "S3 prepare"),
              (_admission.AdmissionPhase, "start", "S4-S7 start"),
              (_dispatch_phase.DispatchPhase, "dispatch", "S8-S10 dispatch"),
              (_commit.CommitPhase, "commit", "S11-S14 commit")]
    governed, per = _instrumented(
        run_code, n, [(_host.RunHost, "dispatch_batch", "host"),
                      (_dispatch.SubCallDispatcher, "dispatch", "dispatcher"),
                      (_dispatch.SubCallDispatcher, "_serve", "serve"),
                      (_dispatch.SubCallDispatcher, "_log_start", "events"),
                      (_dispatch.SubCallDispatcher, "_commit", "events")], stages)
    parts["run_code sub-call, total"] = governed
    parts["  host: decode, checks, encode "] = per["host"] - per["dispatcher"]
    parts["  guest bridge and WIT crossing "] = governed - per["host"]
    parts["  dispatcher round trip"] = per["dispatcher"]
    staged = 0.0
    for part in ("S3 prepare", "S4-S7 start", "S8-S10 dispatch", "S11-S14 commit", "events"):
        label = "dispatch events (start, commit)" if part == "events" else f"pipeline {part}"
        parts[f"    {label}"] = per.get(part, 0.0)
        staged += per.get(part, 0.0)
    parts["    the scheduler and the dispatcher's bookkeeping"] = per["serve"] - staged
    parts["    two thread hand-offs and the loop's turn"] = per["dispatcher"] - per["serve"]
    for label, peer in (("bare bridge", sandbox), ("run_code", run_code)):
        kept, collecting = subcall_memory(peer, n)
        parts[f"{label}: blocks kept per sub-call (count)"] = kept
        parts[f"{label}: garbage collection per sub-call"] = collecting
    return parts


# A program calling the guest's raw `dispatch` import with one fixed one-call batch.
_RAW_DISPATCH = (
    'import sys\ndispatch = sys.modules["wit_world.imports.host"].dispatch\n'
    'batch = \'{"calls":[{"id":1,"name":"echo","args":{"value":1}}],"cancel":[],'
    '"wait_s":null,"until":[1]}\'\n')
_RAW_ANSWER = '{"results":[{"id":1,"ok":true,"value":{"value":1}}]}'


def crossing_floor(sandbox: _peers.Peer, n: int) -> tuple[float, float]:
    """Microseconds per call of the raw `dispatch` import from a program (no binding, no
    JSON in the guest), net of the same loop without calls, best of 3 each: answered by a
    constant in place of `RunHost.dispatch_batch` (the crossing alone: the guest's import
    glue, wasmtime's lift and lower, the host callback), then by the host itself (its
    decoding, checks, the echo and its encoding too). The bare bridge less the second is
    what the guest's bridge costs in place."""
    from codemode.sandbox import _host

    def per_call() -> float:
        loop = _RAW_DISPATCH + f"for i in range({n}):\n    "
        base = min(bench._timed(lambda: sandbox.run(loop + "pass\n0")) for _ in range(3))
        calls = min(bench._timed(lambda: sandbox.run(loop + "dispatch(batch)\n0"))
                    for _ in range(3))
        return (calls - base) / n * 1e6

    through_host = per_call()
    answer = _host.RunHost.dispatch_batch
    _host.RunHost.dispatch_batch = lambda self, batch: _RAW_ANSWER  # type: ignore[method-assign]
    try:
        alone = per_call()
    finally:
        _host.RunHost.dispatch_batch = answer                       # type: ignore[method-assign]
    return alone, through_host


def subcall_memory(peer: _peers.Peer, n: int) -> tuple[float, float]:
    """Per sub-call of `peer`'s sub-call program: memory blocks left allocated, and
    microseconds of garbage collection."""
    collecting: list[float] = [0.0, 0.0]      # seconds so far, start of the current one

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collecting[1] = time.perf_counter()
        else:
            collecting[0] += time.perf_counter() - collecting[1]

    gc.collect()
    blocks = sys.getallocatedblocks()
    gc.callbacks.append(on_gc)
    try:
        peer.run(_subcall_program(peer, n))
    finally:
        gc.callbacks.remove(on_gc)
    kept = sys.getallocatedblocks() - blocks
    return kept / n, collecting[0] / n * 1e6


@contextmanager
def _guest_profiles() -> Iterator[list[dict[str, float]]]:
    """While active, every run's request asks the guest to time its own parts
    (`cm_guest/profile.py`), and the list yielded gets each run's profile (nanoseconds)."""
    import msgspec

    from codemode.sandbox import _pool, _wasm

    profiles: list[dict[str, float]] = []
    encoder, call = _wasm._REQUEST_ENCODER, _pool.Fresh.call

    class ProfilingEncoder:
        def encode(self, request: Any) -> bytes:
            if not isinstance(request, dict):      # a request's parts (its tools) as they are
                return encoder.encode(request)
            return msgspec.json.encode({**request, "profile": True})

    def profiled_call(fresh: _pool.Fresh, text: str) -> str:
        answer = call(fresh, text)
        if '"profile"' in text:
            profiles.append(msgspec.json.decode(answer).get("profile") or {})
        return answer

    _wasm._REQUEST_ENCODER = ProfilingEncoder()             # type: ignore[assignment]
    _pool.Fresh.call = profiled_call                        # type: ignore[method-assign]
    try:
        yield profiles
    finally:
        _wasm._REQUEST_ENCODER = encoder
        _pool.Fresh.call = call                             # type: ignore[method-assign]


def _guest_profiled(sandbox: _peers.Peer, n: int) -> tuple[float, dict[str, float], float]:
    """The bare bridge again, the guest timing its own parts: microseconds per sub-call of
    the whole (net of the loop without calls), of each guest part (`cm_guest/profile.py`)
    and of the host's part, all from the fastest of 5 runs."""
    from codemode.sandbox import _host

    with _guest_profiles() as profiles:
        base = min(bench._timed(lambda: sandbox.run(f"for i in range({n}):\n    pass\n0"))
                   for _ in range(3))
        best: tuple[float, float, dict[str, float]] | None = None
        for _ in range(5):
            with timing([(_host.RunHost, "dispatch_batch", "host")]) as totals:
                wall = bench._timed(lambda: sandbox.run(_subcall_program(sandbox, n)))
            if best is None or wall < best[0]:
                best = (wall, totals["host"], profiles[-1])
    assert best is not None
    wall, host, guest = best
    return ((wall - base) / n * 1e6, {k: v / n / 1e3 for k, v in guest.items()},
            host / n * 1e6)


def _guest_phases(sandbox: _peers.Peer, runs: int, pause_s: float | None) -> dict[str, float]:
    """Milliseconds per fresh run of `x = 1` of each phase the guest times of its `run`
    (`cm_guest/profile.py`: compile, namespace, program), medians over `runs` runs."""
    with _guest_profiles() as profiles:
        for _ in range(runs):
            if pause_s is not None:
                time.sleep(pause_s)
            sandbox.run(bench.TRIVIAL)
    return {phase: statistics.median(p.get(phase, 0.0) for p in profiles) / 1e6
            for phase in ("compile", "namespace", "program")}


def _is_subcall(owner: Any, *args: Any) -> bool:
    """Whether a pipeline stage's call is a sub-call (not the outer `run_code` call, whose
    S8-S10 is the whole run): `Session.prepare(input)` or a `PendingCall`'s method."""
    inp = args[0] if args else getattr(owner, "_input", None)
    return getattr(inp, "parent", None) is not None


def _thread_faults() -> int:
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_parts(sandbox: _peers.Peer, run_code: _peers.Peer, runs: int,
              pause_s: float | None) -> dict[str, float]:
    """Milliseconds per fresh run of each part, back to back (`pause_s` None) or paced;
    page faults and CPU per run. Only the run's own thread is timed: the pool's
    background work (making, preparing, closing instances) is in the CPU figure only."""
    from codemode.sandbox import _pool, _wasm

    faults: list[int] = []
    on_run = threading.local()
    original = _wasm.WasmSandbox._run_here

    def counted(self: Any, *args: Any) -> Any:
        before = _thread_faults()
        on_run.active = True
        try:
            return original(self, *args)
        finally:
            on_run.active = False
            faults.append(_thread_faults() - before)

    targets = [(_pool.Fresh, "new", "store"), (_pool.Fresh, "instantiate", "instantiate"),
               (_pool.Fresh, "call", "guest"), (_pool.InstancePool, "retire", "retire")]
    wall = 0.0
    cpu = _cpu_s()
    with timing(targets, lambda *args: getattr(on_run, "active", False)) as totals:
        _wasm.WasmSandbox._run_here = _timed(counted, "runner", totals)  # type: ignore[method-assign]
        try:
            for _ in range(runs):
                if pause_s is not None:
                    time.sleep(pause_s)
                started = time.perf_counter()
                sandbox.run(bench.TRIVIAL)
                wall += time.perf_counter() - started
        finally:
            _wasm.WasmSandbox._run_here = original                 # type: ignore[method-assign]
    cpu = _cpu_s() - cpu
    per = {k: v / runs * 1e3 for k, v in totals.items()}
    parts = {"sandbox run, total": wall / runs * 1e3,
             "  Store and WASI context": per.get("store", 0.0),
             "  instantiate": per.get("instantiate", 0.0),
             "  guest run (program and crossing)": per.get("guest", 0.0),
             "  retire the instance": per.get("retire", 0.0)}
    parts["  host glue (request, outcome, limits)"] = (
        per.get("runner", 0.0) - parts["  Store and WASI context"] - parts["  instantiate"]
        - parts["  guest run (program and crossing)"] - parts["  retire the instance"])
    parts["  hand-off to the runner thread and back"] = (
        parts["sandbox run, total"] - per.get("runner", 0.0))
    parts["page faults per run (run's thread)"] = sum(faults) / max(len(faults), 1)
    # The guest's own phases of its `run`, in a second pass with its timers on, shown
    # under the guest run's row.
    phases = _guest_phases(sandbox, min(runs, 50), pause_s)
    guest_rows = {f"    guest: {label}": phases[phase] for phase, label in (
        ("compile", "compile"), ("namespace", "the program's globals"),
        ("program", "the program, its value"))}
    guest_rows["    the rest: crossing, request, outcome"] = (
        parts["  guest run (program and crossing)"] - sum(guest_rows.values()))
    ordered: dict[str, float] = {}
    for label, value in parts.items():
        ordered[label] = value
        if label == "  guest run (program and crossing)":
            ordered.update(guest_rows)
    parts = ordered
    parts["CPU per run, all threads"] = cpu / runs * 1e3
    parts.update(run_code_parts(sandbox, run_code, runs, pause_s, parts["sandbox run, total"]))
    return parts


def run_code_parts(sandbox: _peers.Peer, run_code: _peers.Peer, runs: int,
                   pause_s: float | None, bare_ms: float) -> dict[str, float]:
    """Milliseconds per fresh `run_code` run of each part of its host work (on the event
    loop's thread), beside the sandbox run it waits for (on its runner thread) and the
    bare sandbox given the same tools (what binding them costs the guest), the two
    alternating run by run so that the machine's load hits both alike."""
    from codemode._run import dispatch as _dispatch
    from codemode._run import labels as _labels
    from codemode._run import run_code as _run_code
    from codemode.pipeline import _admission, _batches, _commit, _registry, _scheduler
    from codemode.pipeline import _dispatch as _dispatch_phase
    from codemode.pipeline.log import _base
    from codemode.sandbox import _wasm

    assert isinstance(run_code, _peers.RunCodePeer) and isinstance(sandbox, _peers.SandboxPeer)
    specs = run_code.code_mode._stubs_and_specs(None)[1]
    targets = [
        (_base.AppendOnlyLog, "append", "events"),
        (_batches.Batches, "_parse_item", "setup"), (_scheduler.Scheduler, "__init__", "setup"),
        (_registry.ToolRegistry, "prepare", "setup"),
        (_admission.AdmissionPhase, "start", "setup"),
        (_run_code.CodeMode, "exposed_tools", "run setup"),
        (_run_code.CodeMode, "_stubs_and_specs", "run setup"),
        (_run_code.CodeMode, "_records_runs", "run setup"),
        (_dispatch.SubCallDispatcher, "__init__", "run setup"),
        (_labels.RunFlows, "open", "run setup"),
        (_wasm.WasmSandbox, "submit", "submit"),
        (_dispatch.SubCallDispatcher, "drain", "outcome"),
        (_run_code.CodeMode, "_value", "outcome"),
        (_dispatch_phase, "success", "outcome"), (_commit, "success", "outcome"),
        (_commit.CommitPhase, "commit", "commit"),
    ]
    in_run_code = threading.Event()           # only run_code's runs are split

    def on_loop(*args: Any) -> bool:
        return in_run_code.is_set() and threading.current_thread() is threading.main_thread()

    async def nothing() -> None:
        return None

    with_tools: list[float] = []
    governed: list[float] = []
    loop_alone: list[float] = []     # what the peer's own `run_until_complete` costs
    direct: list[float] = []         # one governed call of a tool with no sandbox under it
    session = run_code._session      # the same session, pipeline and log
    with timing(targets, on_loop) as totals, timing(
            [(_wasm.WasmSandbox, "_run_here", "sandbox")],
            lambda *args: in_run_code.is_set()) as inner, \
            wakes(run_code.loop, in_run_code.is_set) as woken:
        for _ in range(runs):
            if pause_s is not None:
                time.sleep(pause_s)
            with_tools.append(bench._timed(lambda: sandbox.run(bench.TRIVIAL, specs)))
            if pause_s is not None:
                time.sleep(pause_s)
            in_run_code.set()
            try:
                governed.append(bench._timed(lambda: run_code.run(bench.TRIVIAL)))
            finally:
                in_run_code.clear()
            if pause_s is not None:
                time.sleep(pause_s)
            loop_alone.append(bench._timed(lambda: run_code.loop.run_until_complete(nothing())))
            if pause_s is not None:
                time.sleep(pause_s)
            direct.append(bench._timed(lambda: run_code.loop.run_until_complete(
                session.call("add", {"a": 1, "b": 2}))))
    per = {k: v / runs * 1e3 for k, v in {**totals, **inner}.items()}
    total_ms = sum(governed) / runs * 1e3
    tools_ms = sum(with_tools) / runs * 1e3
    parts = {f"sandbox run, run_code's {len(specs)} tools, total": tools_ms,
             "run_code run, total": total_ms,
             "  over the bare sandbox": total_ms - bare_ms,
             "  over the sandbox with its tools": total_ms - tools_ms,
             "  the same, p50 of each": (statistics.median(governed)
                                          - statistics.median(with_tools)) * 1e3,
             "  the sandbox run (runner thread)": per.get("sandbox", 0.0)}
    labels = {"events": "session events (turn, step, call, result)",
              "setup": "batch and call: parse, scheduler, S3-S7",
              "run setup": "run: tools, stubs, dispatcher, labels",
              "submit": "hand the run to its runner thread",
              "outcome": "outcome: drain, value, render, S9",
              "commit": "commit S11-S14"}
    for key, label in labels.items():
        parts[f"  {label}"] = per.get(key, 0.0)
    parts["  the rest: loop turns, tasks, wake-ups"] = (
        total_ms - per.get("sandbox", 0.0) - sum(per.get(key, 0.0) for key in labels))
    parts["    waking the runner thread"] = woken["runner"] / runs * 1e3
    parts["    waking the loop from another thread"] = woken["loop"] / runs * 1e3
    parts["    the two, wakes per run (count)"] = (
        woken["runner wakes"] + woken["loop wakes"]) / runs
    parts["    floor: the peer's own loop, a no-op run"] = (
        sum(loop_alone) / runs * 1e3)
    # What governing any call costs, run_code's own included: a direct call of the toolset's
    # `add` through the same session (its turn, step, call and result events), no sandbox.
    parts["  floor: a governed direct call of add, no sandbox"] = (
        sum(direct) - sum(loop_alone)) / runs * 1e3
    return parts


# The first-result programs of `_peers.FIRST_RESULT`, with timers between their steps: each
# prints one JSON object of wall-clock seconds (`time.time()`, comparable with the parent's
# clock) at each step's end and the parts timed inside the run.
_FIRST_PROBE = r'''
import time
_t = {"started": time.time()}
import json
import msgspec, wasmtime, wasmtime.component
_THIRD = %(third)s
for _m in _THIRD:
    __import__(_m)
_t["third-party imports"] = time.time()
%(imports)s
_t["codemode imports"] = time.time()
from codemode.sandbox import _component, _pool

_parts = {}
def _timed(owner, name, part):
    original = getattr(owner, name)
    def timed(*args, **kwargs):
        started = time.time()
        try:
            return original(*args, **kwargs)
        finally:
            _parts[part] = _parts.get(part, 0.0) + time.time() - started
    setattr(owner, name, timed)
for _owner, _name, _part in [
        (_component, "load_component", "component deserialized"),
        (_component, "_linker", "linker"), (_component.EngineConfig, "build", "engine"),
        (_pool.Fresh, "new", "store"), (_pool.Fresh, "instantiate", "instantiate"),
        (_pool.Fresh, "call", "guest run"), (_pool.InstancePool, "retire", "retire")]:
    _timed(_owner, _name, _part)
%(setup)s
_t["setup"] = time.time()
%(run)s
_t["run"] = time.time()
print(json.dumps({"t": _t, "parts": _parts, "value": _value}), flush=True)
'''

_FIRST_STEPS = {
    "sandbox": {
        "third": "()",
        "imports": "from codemode.sandbox import WasmSandbox, RunRequest, SubCallReply",
        "setup": "pass",
        "run": "_value = WasmSandbox().run(RunRequest(code='x = 1\\nx'),\n"
               "                           lambda b: SubCallReply()).value",
    },
    "run_code": {
        "third": "('asyncio',)",
        "imports": "import asyncio\nfrom codemode import CodeMode, Session\n"
                   "from codemode.fixtures.toolset import builtin_tools",
        "setup": "s = Session(tools=builtin_tools(), log=None)\nCodeMode(s)",
        "run": "_value = asyncio.run(s.call('run_code', {'code': 'x = 1\\nx'}))"
               ".value['result']",
    },
}


def first_parts(name: str, spawns: int) -> dict[str, float]:
    """Milliseconds of each part of the first result in a new process (module docstring),
    medians of `spawns` new interpreters after one untimed spawn that fills the bytecode
    cache.

    Raises:
        RuntimeError: a probe did not print the first result (1).
    """
    probe = _FIRST_PROBE % _FIRST_STEPS[name]
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="codemode-bench-pyc-") as pycache:
        env = bench.interpreter_env(pycache)
        for i in range(spawns + 1):
            spawned = time.time()
            done = subprocess.run([sys.executable, "-c", probe], capture_output=True,
                                  text=True, check=True, env=env)
            ended = time.time()
            report = json.loads(done.stdout)
            if report["value"] != 1:
                raise RuntimeError(f"{name}: the first result was {report['value']!r}")
            if not i:
                continue
            t, parts = report["t"], report["parts"]
            run_s = t["run"] - t["setup"]
            # the runtime loads inside the first run for `run_code`, before it for neither
            loading = sum(parts.get(p, 0.0) for p in ("engine", "component deserialized",
                                                      "linker"))
            steps = {
                "first result, total": ended - spawned,
                "  interpreter start (site and import hooks)": t["started"] - spawned,
                "  third-party imports (wasmtime, msgspec, asyncio)":
                    t["third-party imports"] - t["started"],
                "  codemode imports": t["codemode imports"] - t["third-party imports"],
                "  Session and CodeMode (tool registration)":
                    t["setup"] - t["codemode imports"],
                "  first run": run_s,
                "    Engine": parts.get("engine", 0.0),
                "    component deserialized from the cache":
                    parts.get("component deserialized", 0.0) - parts.get("engine", 0.0),
                "    Linker": parts.get("linker", 0.0),
                "    Store and WASI context": parts.get("store", 0.0),
                "    instantiate": parts.get("instantiate", 0.0),
                "    guest run (program and crossing)": parts.get("guest run", 0.0),
                "    retire the instance": parts.get("retire", 0.0),
                "    the rest (host glue, hand-offs, event loop, pipeline)": run_s - loading
                    - sum(parts.get(p, 0.0) for p in ("store", "instantiate", "guest run",
                                                      "retire")),
                "  interpreter exit": ended - t["run"],
            }
            for label, seconds in steps.items():
                samples.setdefault(label, []).append(seconds * 1e3)
    return {label: statistics.median(values) for label, values in samples.items()}


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def main(argv: list[str] | None = None) -> None:
    """Parse the options, measure, print the two tables (and Monty's figures, if installed,
    as the baseline of the ratios)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.breakdown",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=bench._positive_int, default=200,
                        help="fresh runs per column (at least 1)")
    parser.add_argument("--subcalls", type=bench._positive_int, default=500,
                        help="sub-calls in the sub-call program (at least 1)")
    parser.add_argument("--first", action="store_true",
                        help="break down the first result in a new process instead")
    parser.add_argument("--spawns", type=bench._positive_int, default=9,
                        help="new interpreters per peer for --first (at least 1)")
    args = parser.parse_args(argv)
    if args.first:
        print_first(args.spawns)
        return
    print("measuring sandbox and run_code ...", file=sys.stderr)
    sandbox, run_code = _peers.make("sandbox"), _peers.make("run_code")
    try:
        subcall = subcall_parts(sandbox, run_code, args.subcalls)
        unpaced = run_parts(sandbox, run_code, args.runs, None)
        paced = run_parts(sandbox, run_code, args.runs, bench.PAUSE_S)
    finally:
        sandbox.close()
        run_code.close()
    monty: dict[str, float] = {}
    if "monty" in _peers.available():
        print("measuring monty ...", file=sys.stderr)
        peer = _peers.make("monty")
        try:
            monty["sub-call"] = bench.subcall_cost(peer, args.subcalls) * 1e6
            monty["run"] = sum(bench._timed(lambda: peer.run(bench.TRIVIAL))
                               for _ in range(args.runs)) / args.runs * 1e3
            monty["paced"] = bench.paced_runs(peer, args.runs) * 1e3
        finally:
            peer.close()

    print(f"{'one sub-call':<52}{'us':>10}" + (f"{'/ monty':>10}" if monty else ""))
    for label, value in subcall.items():
        ratio = (f"{value / monty['sub-call']:>10.3g}" if monty and "total" in label else "")
        print(f"{label:<52}{_fmt(value):>10}{ratio}")
    if monty:
        print(f"{'monty sub-call (baseline)':<52}{_fmt(monty['sub-call']):>10}")
    print()
    apart = f"{bench.PAUSE_S * 1e3:g} ms apart"
    print(f"{'one fresh run of x = 1':<52}{'back to back':>14}{apart:>14}")
    for label in unpaced:
        unit = "" if "faults" in label or "(count)" in label else " ms"
        print(f"{label + unit:<52}{_fmt(unpaced[label]):>14}{_fmt(paced[label]):>14}")
    if monty:
        print(f"{'monty run, total (baseline) ms':<52}{_fmt(monty['run']):>14}"
              f"{_fmt(monty['paced']):>14}")
        for name in ("sandbox run, total", "run_code run, total"):
            print(f"{name.split(',')[0] + ' / monty':<52}"
                  f"{unpaced[name] / monty['run']:>14.3g}{paced[name] / monty['paced']:>14.3g}")
    print(f"\nmean over {args.runs} runs and {args.subcalls} sub-calls; Python "
          f"{sys.version.split()[0]}" + ("" if monty else "; monty not installed"))


def print_first(spawns: int) -> None:
    """The `--first` table: each part of the first result, per codemode peer, and Monty's
    total (when installed) as the baseline."""
    print("measuring the first result in new processes ...", file=sys.stderr)
    columns = {name: first_parts(name, spawns) for name in ("sandbox", "run_code")}
    monty = (bench.first_result("monty", spawns) * 1e3
             if "monty" in _peers.available() else None)
    print(f"{'first result in a new process, ms':<60}{'sandbox':>10}{'run_code':>10}")
    for label in columns["sandbox"]:
        print(f"{label:<60}" + "".join(f"{_fmt(columns[n][label]):>10}" for n in columns))
    if monty is not None:
        print(f"{'monty first result (baseline)':<60}{_fmt(monty):>10}")
        print(f"{'total / monty':<60}" + "".join(
            f"{columns[n]['first result, total'] / monty:>10.3g}" for n in columns))
    print(f"\nmedian of {spawns} new interpreters each, bytecode cached; Python "
          f"{sys.version.split()[0]}" + ("" if monty is not None else "; monty not installed"))


if __name__ == "__main__":
    main()
