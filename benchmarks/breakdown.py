"""Where the time of one sub-call and of one fresh run goes, part by part, beside the totals.

    python -m benchmarks.breakdown [--runs 200] [--subcalls 500]

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
  around the echo) and the guest's with the crossing (the rest);
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
Store, instantiating, the guest's `run` (its program and the crossing), the host's own
glue around them, retiring the instance; minor page faults of the run's thread per run
(`getrusage(RUSAGE_THREAD)`: memory the instance touches for the first time) and the
process's CPU per run (all threads, background work included); and `run_code`'s total
beside the bare sandbox's.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import resource
import sys
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


def _timed(fn: Callable[..., Any], part: str, totals: Totals,
           counts: Callable[..., bool] = lambda *args: True) -> Callable[..., Any]:
    if asyncio.iscoroutinefunction(fn):
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
    from codemode import _dispatch
    from codemode.pipeline import _registry, _session
    from codemode.sandbox import _host

    parts: dict[str, float] = {}
    bare, per = _instrumented(sandbox, n, [(_host.RunHost, "dispatch_batch", "host")])
    parts["bare bridge, total"] = bare
    parts["  host: decode, checks, encode, echo (json)"] = per["host"]
    parts["  guest bridge and WIT crossing"] = bare - per["host"]
    stages = [(_session.Session, "prepare", "S3 prepare"),
              (_registry.PendingCall, "start", "S4-S7 start"),
              (_registry.PendingCall, "dispatch", "S8-S10 dispatch"),
              (_registry.PendingCall, "commit", "S11-S14 commit")]
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
    parts["CPU per run, all threads"] = cpu / runs * 1e3
    samples = []
    for _ in range(runs):
        if pause_s is not None:
            time.sleep(pause_s)
        started = time.perf_counter()
        run_code.run(bench.TRIVIAL)
        samples.append(time.perf_counter() - started)
    parts["run_code run, total"] = sum(samples) / runs * 1e3
    parts["  over the bare sandbox"] = parts["run_code run, total"] - parts["sandbox run, total"]
    return parts


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
    args = parser.parse_args(argv)
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
        unit = "" if "faults" in label else " ms"
        print(f"{label + unit:<52}{_fmt(unpaced[label]):>14}{_fmt(paced[label]):>14}")
    if monty:
        print(f"{'monty run, total (baseline) ms':<52}{_fmt(monty['run']):>14}"
              f"{_fmt(monty['paced']):>14}")
        for name in ("sandbox run, total", "run_code run, total"):
            print(f"{name.split(',')[0] + ' / monty':<52}"
                  f"{unpaced[name] / monty['run']:>14.3g}{paced[name] / monty['paced']:>14.3g}")
    print(f"\nmean over {args.runs} runs and {args.subcalls} sub-calls; Python "
          f"{sys.version.split()[0]}" + ("" if monty else "; monty not installed"))


if __name__ == "__main__":
    main()
