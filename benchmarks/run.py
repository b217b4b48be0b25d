"""Latency benchmarks for the sandbox and code mode, with native CPython as the baseline.

    python -m benchmarks.run [--runs 200] [--subcalls 500]

Prints, measured in this one run on this machine:
- first result in a fresh process with a warm disk cache (cold start), and the same for
  native CPython (`python -c`), and their ratio;
- per-run latency (fresh Store + instance + trivial program) p50/p95, against `exec` of
  the same program in this process;
- sub-call round trip in microseconds: through the sandbox bridge alone, and through the
  whole pipeline (`run_code` with the built-in toolset), per call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time

TRIVIAL = "x = sum(range(10))\nx"

_COLD_START = """
import time, json
t = time.perf_counter()
from codemode.sandbox import WasmSandbox, RunRequest
out = WasmSandbox().run(RunRequest(code={code!r}), lambda b: '{{"results": []}}')
assert out.value == 45, out
print(json.dumps(time.perf_counter() - t))
"""


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def cold_start(repeats: int = 3) -> tuple[float, float]:
    """Seconds to the first result in a fresh interpreter: (codemode, native CPython)."""
    ours, native = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", _COLD_START.format(code=TRIVIAL)], check=True,
                       capture_output=True)
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", TRIVIAL.replace("\nx", "\nprint(x)")],
                       check=True, capture_output=True)
        native.append(time.perf_counter() - started)
    return statistics.median(ours), statistics.median(native)


def per_run(runs: int) -> tuple[list[float], list[float]]:
    """Seconds per run: (fresh sandbox instance, native exec) for the trivial program."""
    from codemode.sandbox import RunRequest, WasmSandbox

    sandbox = WasmSandbox()
    request = RunRequest(code=TRIVIAL)
    sandbox.run(request, lambda b: '{"results": []}')          # load the component
    ours = []
    for _ in range(runs):
        started = time.perf_counter()
        sandbox.run(request, lambda b: '{"results": []}')
        ours.append(time.perf_counter() - started)
    code = compile(TRIVIAL, "<program>", "exec")
    native = []
    for _ in range(runs):
        started = time.perf_counter()
        exec(code, {"__name__": "__main__"})
        native.append(time.perf_counter() - started)
    return ours, native


def bridge_round_trip(n: int) -> float:
    """Microseconds per sync sub-call through the sandbox bridge with an echo host."""
    from codemode.sandbox import ParamSpec, RunRequest, ToolSpec, WasmSandbox

    def echo(batch: str) -> str:
        request = json.loads(batch)
        return json.dumps({"results": [{"id": c["id"], "ok": True, "value": c["args"]}
                                       for c in request["calls"]]})

    tools = (ToolSpec(name="echo", alias="echo", params=(ParamSpec(name="value"),)),)
    sandbox = WasmSandbox()

    def timed(code: str) -> float:
        best = float("inf")
        for _ in range(3):
            out = sandbox.run(RunRequest(code=code, tools=tools), echo)
            assert out.status == "ok", out
            best = min(best, out.duration_s)
        return best

    base = timed(f"for i in range({n}):\n    pass")
    with_calls = timed(f"for i in range({n}):\n    echo(value=i)")
    return (with_calls - base) / n * 1e6


def pipeline_round_trip(n: int) -> float:
    """Microseconds per sync sub-call through run_code and the whole pipeline."""
    from codemode import CodeMode, Session
    from codemode.fixtures.toolset import builtin_tools

    async def main() -> float:
        session = Session(tools=builtin_tools(), log=None)
        CodeMode(session)

        async def timed(code: str) -> float:
            best = float("inf")
            for _ in range(3):
                started = time.perf_counter()
                result = await session.call("run_code", {"code": code})
                assert not result.is_error, result.text
                best = min(best, time.perf_counter() - started)
            return best

        base = await timed(f"for i in range({n}):\n    pass")
        with_calls = await timed(f"for i in range({n}):\n    add(a=i, b=1)")
        return (with_calls - base) / n * 1e6

    return asyncio.run(main())


def _positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (argparse names the option)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> None:
    """Parse the options and print the table. Bad options exit 2 with a message naming the
    option (argparse's usage error), before anything is measured."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=_positive_int, default=200,
                        help="runs for per-run latency (at least 1)")
    parser.add_argument("--subcalls", type=_positive_int, default=500,
                        help="sub-calls per program (at least 1)")
    args = parser.parse_args(argv)

    print("warming the component cache ...", file=sys.stderr)
    per_run(1)
    ours_cold, native_cold = cold_start()
    ours, native = per_run(args.runs)
    bridge_us = bridge_round_trip(args.subcalls)
    pipeline_us = pipeline_round_trip(args.subcalls)

    p50, p95 = _percentile(ours, 0.5) * 1e3, _percentile(ours, 0.95) * 1e3
    n50 = _percentile(native, 0.5) * 1e3
    print(f"{'measure':<52}{'codemode':>12}{'baseline':>12}{'ratio':>9}")
    print(f"{'first result, fresh process, warm disk cache (s)':<52}"
          f"{ours_cold:>12.3f}{native_cold:>12.3f}{ours_cold / native_cold:>9.1f}")
    print(f"{'per run, trivial program, p50 (ms)':<52}{p50:>12.3f}{n50:>12.4f}"
          f"{p50 / n50:>9.0f}")
    print(f"{'per run, trivial program, p95 (ms)':<52}{p95:>12.3f}"
          f"{_percentile(native, 0.95) * 1e3:>12.4f}{'':>9}")
    print(f"{'sub-call round trip, sandbox bridge (us)':<52}{bridge_us:>12.1f}")
    print(f"{'sub-call round trip, through the pipeline (us)':<52}{pipeline_us:>12.1f}")
    print("baseline: native CPython (python -c / exec of the same program in-process)")


if __name__ == "__main__":
    main()
