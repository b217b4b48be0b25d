"""Side-by-side benchmarks: codemode's sandbox and `run_code` against Monty, RestrictedPython
and native CPython, all measured in one run on this machine.

    python -m benchmarks.run [--runs 200] [--subcalls 1000] [--seconds S]

Peers (`benchmarks/_peers.py`): `sandbox` (WasmSandbox alone), `run_code` (the whole
pipeline), `monty` (pydantic-monty, when installed: `pip install -e '.[bench]'`),
`eryx` (pyeryx, Python 3.12+) and `harness` (pydantic-ai-harness's CodeMode) when installed
(the `bench` extra), `restricted` (RestrictedPython) and `native` (CPython's `exec`).
Measures, per peer:

- fresh run of `x = 1`, p50 and p95 over `--runs` runs back to back (ms), and p50 of
  runs `PAUSE_S` apart (ms): the sandbox makes instances ahead only in idle time; then the
  same paced, of a program making one tool call (`one_call`): `x = 1` names no tool, so
  `run_code` does not type-check it, and this one it does;
- net cost of one sub-call, from one program making `--subcalls` of them (us);
- three compute workloads: a loop, a JSON round trip, a sort (ms, median of 3);
- first result in a new process: spawn an interpreter, import, run `x = 1` (s, median of 5,
  after one untimed spawn that writes the bytecode cache, as an installed package has it);
- fresh runs per second on all cores, one process per core, over `--seconds`, with the CPU
  (ms, every thread of the process: the pool's background work included) and the minor
  page faults one run costs its process (not for Monty, whose runs are in its workers);
- PSS of one such process once warm, its child processes included (MiB);
- PSS one ready instance of codemode's instance pool adds (MiB; `benchmarks.footprint`).

Then the same figures as ratios: each codemode column against native, against the
fastest of the other sandboxes (eryx, Monty, RestrictedPython), and against its direct
counterpart (`sandbox` against eryx, `run_code` against pydantic-ai-harness's `run_code`);
above 1 means codemode is slower or bigger.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from . import _peers

TRIVIAL = "x = 1\nx"
WORKLOADS = {
    "loop": "s = 0\nfor i in range(200000):\n    s = s + i * i % 7\ns",
    "json": "import json\nd = {'k': [{'i': i, 's': str(i)} for i in range(200)]}\n"
            "for _ in range(50):\n    d = json.loads(json.dumps(d))\nlen(d['k'])",
    "sort": "xs = [(i * 7919) % 100003 for i in range(100000)]\nsorted(xs)[-1]",
}
EXPECTED = {"loop": 399999, "json": 200, "sort": 100002}
CODEMODE = ("sandbox", "run_code")
PAUSE_S = 0.02          # between the runs of the paced latency row
OTHERS = ("eryx", "monty", "restricted")
# Each codemode column against its direct counterpart: the same wasmtime and CPython
# (eryx), and another code mode's whole `run_code` and nested call (pydantic-ai-harness).
COUNTERPARTS = (("sandbox", "eryx"), ("run_code", "harness"))
# Runs in worker processes (Monty's): no CPU or faults per run here.
OUT_OF_PROCESS = ("monty", "harness")


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def fresh_runs(peer: _peers.Peer, runs: int) -> tuple[float, float]:
    """p50 and p95 seconds of a fresh run of the trivial program, runs back to back."""
    samples = [_timed(lambda: peer.run(TRIVIAL)) for _ in range(runs)]
    return _percentile(samples, 0.5), _percentile(samples, 0.95)


def paced_runs(peer: _peers.Peer, runs: int, pause_s: float = PAUSE_S,
               code: str = TRIVIAL) -> float:
    """p50 seconds of a fresh run of `code` (the trivial program), `pause_s` seconds after
    the last one ended (as runs come from a model: never back to back)."""
    samples = []
    for _ in range(runs):
        time.sleep(pause_s)
        samples.append(_timed(lambda: peer.run(code)))
    return _percentile(samples, 0.5)


def one_call(peer: _peers.Peer) -> str:
    """A program making one tool call (one sub-call), its value the call's: it names a
    tool, so `run_code` type-checks it, where `x = 1`, naming none, is not checked."""
    return f"i = 1\n{_peers.CALL[peer.name]}"


def subcall_cost(peer: _peers.Peer, n: int) -> float:
    """Seconds one sub-call adds to a program making `n` of them (best of 3 each)."""
    call = _peers.CALL[peer.name]
    base = min(_timed(lambda: peer.run(f"for i in range({n}):\n    pass\n0")) for _ in range(3))
    calls = min(_timed(lambda: peer.run(f"for i in range({n}):\n    {call}\n0"))
                for _ in range(3))
    return (calls - base) / n


def workload(peer: _peers.Peer, name: str) -> float:
    """Median seconds of 3 fresh runs of a compute workload (its result checked)."""
    samples = []
    for _ in range(3):
        started = time.perf_counter()
        value = peer.run(WORKLOADS[name])
        samples.append(time.perf_counter() - started)
        if value != EXPECTED[name]:
            raise RuntimeError(f"{peer.name} {name}: got {value!r}, not {EXPECTED[name]!r}")
    return statistics.median(samples)


def interpreter_env(pycache: str) -> dict[str, str]:
    """The environment of a new interpreter for the first-result rows: this one's, with
    bytecode written to and read from `pycache` (`PYTHONPYCACHEPREFIX`), as an installed
    package has its modules compiled (pip compiles them on install). Without it, an
    environment with `PYTHONDONTWRITEBYTECODE` (or a checkout nobody imported from yet)
    would time compiling the peer's source on every spawn, which no user pays."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def first_result(name: str, spawns: int = 5) -> float:
    """Median seconds of `spawns` new interpreters each printing the first result, after
    one untimed spawn that fills the bytecode cache (`interpreter_env`)."""
    samples = []
    with tempfile.TemporaryDirectory(prefix="codemode-bench-pyc-") as pycache:
        env = interpreter_env(pycache)
        for i in range(spawns + 1):
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", _peers.FIRST_RESULT[name]],
                                  capture_output=True, text=True, check=True, env=env)
            if i:
                samples.append(time.perf_counter() - started)
            if done.stdout.strip() != "1":
                raise RuntimeError(f"{name}: first result printed {done.stdout!r}")
    return statistics.median(samples)


def _pss_bytes(pid: int) -> int | None:
    """PSS of `pid` and its descendants (/proc/PID/smaps_rollup), or None if unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            total = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("Pss:"))
    except (OSError, StopIteration, ValueError):
        return None
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                parent = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent == pid:
            total += _pss_bytes(int(entry)) or 0
    return total


def _usage() -> tuple[float, int]:
    """CPU seconds (user + system, every thread) and minor page faults of this process and
    of its children that ended (Monty's workers are counted by their PSS, not here)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime, own.ru_minflt


def _throughput_worker(name: str, seconds: float, barrier: object, out: object) -> None:
    peer = _peers.make(name)
    try:
        barrier.wait()                                    # type: ignore[attr-defined]
        runs, started = 0, time.perf_counter()
        cpu, faults = _usage()
        while (elapsed := time.perf_counter() - started) < seconds:
            peer.run(TRIVIAL)
            runs += 1
        cpu_end, faults_end = _usage()
        out.put((runs / elapsed, _pss_bytes(os.getpid()),   # type: ignore[attr-defined]
                 (cpu_end - cpu) / runs, (faults_end - faults) / runs))
    finally:
        peer.close()


def throughput(name: str, seconds: float, processes: int
               ) -> tuple[float, float | None, float, float]:
    """Fresh runs per second summed over `processes` processes running at once; the mean
    PSS (bytes) of one process, warm, children included (None if not measurable); and
    the mean CPU seconds and minor page faults one run costs its process (all threads:
    the pool's background work included; not a worker process's, for Monty)."""
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    workers = [ctx.Process(target=_throughput_worker, args=(name, seconds, barrier, out))
               for _ in range(processes)]
    for worker in workers:
        worker.start()
    results = [out.get(timeout=120 + seconds) for _ in workers]
    for worker in workers:
        worker.join()
    pss = [r[1] for r in results if r[1] is not None]
    return (sum(r[0] for r in results),
            statistics.mean(pss) if len(pss) == len(results) else None,
            statistics.mean(r[2] for r in results), statistics.mean(r[3] for r in results))


def _positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (argparse names the option)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be above 0 and finite, got {text}")
    return value


# Row label, unit, whether higher is better.
ROWS = [("fresh run x = 1, p50", "ms", False), ("fresh run x = 1, p95", "ms", False),
        (f"same, {PAUSE_S * 1e3:g} ms apart, p50", "ms", False),
        ("  one tool call, p50", "ms", False),
        ("one sub-call, net", "us", False), ("loop", "ms", False),
        ("json round trip", "ms", False), ("sort", "ms", False),
        ("first result, new process", "s", False), ("fresh runs/s, all cores", "/s", True),
        ("  CPU per run, its process", "ms", False),
        ("  page faults per run", "", False),
        ("PSS per process", "MiB", False), ("PSS per pooled instance", "MiB", False)]


def measure(names: list[str], runs: int, subcalls: int, seconds: float,
            processes: int) -> dict[str, list[float | None]]:
    """Every row of `ROWS` for every peer in `names`, in display units."""
    figures: dict[str, list[float | None]] = {}
    for name in names:
        print(f"measuring {name} ...", file=sys.stderr)
        peer = _peers.make(name)
        try:
            p50, p95 = fresh_runs(peer, runs)
            row: list[float | None] = [p50 * 1e3, p95 * 1e3, paced_runs(peer, runs) * 1e3,
                                       paced_runs(peer, runs, code=one_call(peer)) * 1e3,
                                       subcall_cost(peer, subcalls) * 1e6]
            row += [workload(peer, w) * 1e3 for w in WORKLOADS]
        finally:
            peer.close()
        row.append(first_result(name))
        rate, pss, cpu, faults = throughput(name, seconds, processes)
        in_process = name not in OUT_OF_PROCESS     # else its runs' CPU is not counted
        row += [rate, cpu * 1e3 if in_process else None, faults if in_process else None,
                None if pss is None else pss / 2**20]
        figures[name] = row
    pooled = [n for n in CODEMODE if n in figures]
    if pooled:
        from . import footprint

        per_instance, _dirty = footprint.pooled_instance_bytes()
        for name in figures:
            figures[name].append(per_instance / 2**20 if name in pooled else None)
    else:
        for row in figures.values():
            row.append(None)
    return figures


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) >= 0.01 else f"{value:.2g}"


def _ratio(ours: float | None, theirs: float | None, higher_better: bool) -> float | None:
    if ours is None or theirs is None or ours <= 0 or theirs <= 0:
        return None
    return theirs / ours if higher_better else ours / theirs


def render(figures: dict[str, list[float | None]]) -> str:
    """The figures table, then the ratio table."""
    names = list(figures)
    lines = [f"{'measure':<28}{'unit':>5}" + "".join(f"{n:>12}" for n in names)]
    for i, (label, unit, _) in enumerate(ROWS):
        lines.append(f"{label:<28}{unit:>5}" + "".join(f"{_fmt(figures[n][i]):>12}"
                                                      for n in names))
    ours = [n for n in CODEMODE if n in figures]
    others = [n for n in OTHERS if n in figures]
    pairs = [(a, b) for a, b in COUNTERPARTS if a in figures and b in figures]
    heads = ([f"{n}/native" for n in ours] + [f"{n}/best" for n in ours if others]
             + [f"{a}/{b}" for a, b in pairs])
    lines += ["", f"{'ratio (above 1: codemode slower or bigger)':<44}"
              + "".join(f"{h:>18}" for h in heads) + "  best peer"]
    for i, (label, _, higher) in enumerate(ROWS):
        cells = [_ratio(figures[n][i], figures["native"][i], higher) for n in ours]
        best = None
        if others:
            known = [n for n in others if figures[n][i] is not None]
            if known:
                pick = max if higher else min
                best = pick(known, key=lambda n: figures[n][i] or 0.0)
            cells += [_ratio(figures[n][i], figures[best][i] if best else None, higher)
                      for n in ours]
        cells += [_ratio(figures[a][i], figures[b][i], higher) for a, b in pairs]
        lines.append(f"{label:<44}" + "".join(f"{_fmt(c):>18}" for c in cells)
                     + f"  {best or '-'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Parse the options and print the tables. Bad options exit 2 with a message naming the
    option (argparse's usage error), before anything is measured."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=_positive_int, default=200,
                        help="fresh runs for the latency percentiles (at least 1)")
    parser.add_argument("--subcalls", type=_positive_int, default=1000,
                        help="sub-calls in the sub-call program (at least 1)")
    parser.add_argument("--seconds", type=_positive_seconds, default=None,
                        help="window of the runs/s measure, per peer (default: runs/100 "
                             "seconds, between 0.2 and 2)")
    args = parser.parse_args(argv)
    seconds = args.seconds or min(2.0, max(0.2, args.runs / 100))
    processes = os.cpu_count() or 1
    names = _peers.available()
    missing = sorted(set(_peers.NAMES) - set(names))
    figures = measure(names, args.runs, args.subcalls, seconds, processes)
    print(render(figures))
    print(f"\n{processes} processes for runs/s, {seconds:g} s each; Python "
          f"{sys.version.split()[0]}" + (f"; not installed: {', '.join(missing)}"
                                        if missing else ""))


if __name__ == "__main__":
    main()
