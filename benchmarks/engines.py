"""The sandbox's fresh runs under other wasmtime Engine configurations, and eryx's under its
own, each in processes of its own, against the sandbox's configuration measured in the same
run.

    python -m benchmarks.engines [--runs 200] [--seconds 4] [--only NAME ...]

Per configuration (`VARIANTS`, then eryx's `ERYX_VARIANTS` when pyeryx is installed), in a
new process: `--runs` fresh runs of `x = 1` back to back (p50 ms; CPU ms and minor page
faults per run of that process, every thread), the loop workload of `benchmarks.run`
(median of 3, ms), then `benchmarks.run`'s runs/s measure (two processes at once for
`--seconds`: runs/s summed, CPU ms and page faults per run, PSS MiB of one process). Then
each figure as a ratio against the sandbox's own configuration (`default`), above 1:
more than it.

The sandbox's configurations replace `EngineConfig.build` (`sandbox/_component.py`) in the
measuring processes only, through the C library wasmtime-py ships (`wasmtime._bindings`):
wasmtime's pooling allocator with `keep` MiB of each linear memory kept resident between
instances, and `memory_init_cow` off (its own compiled component, in a temporary cache).
`pagemap` adds `PoolingAllocationConfig::pagemap_scan`, which has no C setter: it is set in
the configuration's memory, at the offset it has in wasmtime-py 50.0.1's library for
linux-x86_64 (found by setting every other field through its setter and seeing which
bytes change), and only there, after checking the bytes around it; elsewhere it is left
out. It measures what that missing setter would give; codemode never does this.
eryx's configurations are its environment variables (`ERYX_ALLOCATOR`,
`ERYX_POOL_PAGEMAP_SCAN`).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import _peers, run

MiB = 1 << 20
VARIANTS: dict[str, dict[str, int | bool]] = {
    "default": {},                                   # the sandbox's: on-demand, CoW image
    "pooling": {"pool": 0},
    "pooling, keep 16 MiB": {"pool": 16},
    "pooling, keep 32 MiB": {"pool": 32},
    "pooling, keep 48 MiB, memory_init_cow off": {"pool": 48, "cow": False},
    "pooling, keep 16 MiB, pagemap_scan": {"pool": 16, "pagemap": True},
    "pooling, keep 64 MiB, pagemap_scan": {"pool": 64, "pagemap": True},
}
ERYX_VARIANTS: dict[str, dict[str, int | bool]] = {
    "eryx": {},                                       # its defaults: pooling, pagemap_scan
    "eryx, ERYX_POOL_PAGEMAP_SCAN=0": {"ERYX_POOL_PAGEMAP_SCAN": "0"},
    "eryx, ERYX_ALLOCATOR=on-demand": {"ERYX_ALLOCATOR": "on-demand"},
}
POOL_SLOTS = 64          # memories, tables, component instances and stacks in the pool
# PoolingAllocationConfig::pagemap_scan in wasmtime-py 50.0.1's linux-x86_64 library: the
# byte's offset, and the bytes from offset 128 a default configuration has there
# (max_unused_warm_slots = 100, then two `Enabled::No`, the second pagemap_scan).
_PAGEMAP = {("50.0.1", "x86_64"): (133, b"\x64\x00\x00\x00\x02\x02")}


def pagemap_place() -> tuple[int, bytes] | None:
    """Where pagemap_scan is in a pooling configuration of this wasmtime, and the bytes
    from offset 128 of a default one, if known."""
    from codemode.sandbox._cache import dist_version

    known = _PAGEMAP.get((dist_version("wasmtime") or "", platform.machine()))
    return known if sys.platform == "linux" else None


def _pooling(config: Any, keep_mib: int, pagemap: bool) -> None:
    from wasmtime import _bindings as b

    pooling = b.wasmtime_pooling_allocation_config_new()
    try:
        b.wasmtime_pooling_allocation_config_linear_memory_keep_resident_set(
            pooling, keep_mib * MiB)
        for field in ("total_memories", "total_tables", "total_component_instances",
                      "total_stacks"):
            getattr(b, f"wasmtime_pooling_allocation_config_{field}_set")(pooling, POOL_SLOTS)
        b.wasmtime_pooling_allocation_config_total_core_instances_set(pooling, 32 * POOL_SLOTS)
        if pagemap:
            place = pagemap_place()
            address = ctypes.cast(pooling, ctypes.c_void_p).value or 0
            if place is None or ctypes.string_at(address + 128, len(place[1])) != place[1]:
                raise RuntimeError("pagemap_scan's place is not known for this wasmtime")
            ctypes.c_ubyte.from_address(address + place[0]).value = 1    # Enabled::Yes
        b.wasmtime_pooling_allocation_strategy_set(config.ptr(), pooling)
    finally:
        b.wasmtime_pooling_allocation_config_delete(pooling)


def apply(name: str) -> None:
    """Build the sandbox's Engines as variant `name` does, in this process."""
    from codemode.sandbox import _component

    spec = VARIANTS[name]
    if not spec:
        return

    def build(self: _component.EngineConfig) -> Any:
        import wasmtime

        config = self.wasmtime_config()      # the sandbox's settings, then the variant's
        config.memory_init_cow = bool(spec.get("cow", True))
        _pooling(config, int(spec["pool"]), bool(spec.get("pagemap", False)))
        return wasmtime.Engine(config)
    _component.EngineConfig.build = build              # type: ignore[method-assign]


def _usage() -> tuple[float, int]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime, own.ru_minflt


def _worker(peer: str, variant: str, seconds: float, barrier: Any, out: Any) -> None:
    if peer == "sandbox":
        apply(variant)
    run._throughput_worker(peer, seconds, barrier, out)


def measure_one(peer: str, variant: str, runs: int, seconds: float) -> dict[str, float]:
    """The figures of one configuration, in this process and two spawned ones."""
    if peer == "sandbox":
        apply(variant)
    made = _peers.make(peer)
    try:
        for _ in range(5):
            made.run(run.TRIVIAL)
        cpu, faults = _usage()
        walls = []
        for _ in range(runs):
            started = time.perf_counter()
            made.run(run.TRIVIAL)
            walls.append(time.perf_counter() - started)
        cpu_end, faults_end = _usage()
        loop = run.workload(made, "loop")
    finally:
        made.close()
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(peer, variant, seconds, barrier, out))
               for _ in range(2)]
    for worker in workers:
        worker.start()
    results = [out.get(timeout=120 + seconds) for _ in workers]
    for worker in workers:
        worker.join()
    return {"p50 ms": statistics.median(walls) * 1e3,
            "CPU ms": (cpu_end - cpu) / runs * 1e3, "faults": (faults_end - faults) / runs,
            "loop ms": loop * 1e3, "runs/s (2)": sum(r[0] for r in results),
            "CPU ms (2)": statistics.mean(r[2] for r in results) * 1e3,
            "faults (2)": statistics.mean(r[3] for r in results),
            "PSS MiB (2)": statistics.mean(r[1] or 0 for r in results) / MiB}


COLUMNS = ("p50 ms", "CPU ms", "faults", "loop ms", "runs/s (2)", "CPU ms (2)", "faults (2)",
           "PSS MiB (2)")


def _in_process(name: str, runs: int, seconds: float) -> dict[str, float]:
    """`measure_one` in a new interpreter (a memory_init_cow-off variant with a cache of
    its own: its compiled component differs; the `.wasm` is linked in, not rebuilt)."""
    env = {**os.environ, **ERYX_VARIANTS.get(name, {})}
    with tempfile.TemporaryDirectory(prefix="codemode-engines-") as own:
        if VARIANTS.get(name, {}).get("cow") is False:
            from codemode.sandbox._cache import cache_dir, source_hash

            wasm = cache_dir() / f"guest-{source_hash()}.wasm"
            if wasm.exists():
                (Path(own) / wasm.name).symlink_to(wasm)
            env["CODEMODE_CACHE_DIR"] = own
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.engines", "--one", name, "--runs", str(runs),
             "--seconds", str(seconds)], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{name}: {done.stderr.strip()[-2000:]}")
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return figures


def main(argv: list[str] | None = None) -> None:
    """Parse the options, measure every configuration and print the tables."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engines",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=run._positive_int, default=200,
                        help="fresh runs back to back per configuration (at least 1)")
    parser.add_argument("--seconds", type=run._positive_seconds, default=4.0,
                        help="window of the runs/s measure (default 4)")
    names = [*VARIANTS, *ERYX_VARIANTS]
    parser.add_argument("--only", nargs="+", choices=names, default=None,
                        help="these configurations only (default: all; `default` is "
                             "always measured, as the baseline)")
    parser.add_argument("--one", choices=names, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:                          # one configuration, in this process: its JSON
        peer = "eryx" if args.one in ERYX_VARIANTS else "sandbox"
        print(json.dumps(measure_one(peer, args.one, args.runs, args.seconds)))
        return
    chosen = ["default", *(n for n in (args.only or names) if n != "default")]
    skipped = [n for n in chosen if VARIANTS.get(n, {}).get("pagemap") and
               pagemap_place() is None]
    if "eryx" not in _peers.available():
        skipped += [n for n in chosen if n in ERYX_VARIANTS]
    print(f"load average {os.getloadavg()[0]:.2f} at the start", file=sys.stderr)
    figures = {}
    for name in chosen:
        if name not in skipped:
            print(f"measuring {name} ...", file=sys.stderr)
            figures[name] = _in_process(name, args.runs, args.seconds)
    width = max(len(n) for n in figures) + 2
    heads = "".join(f"{c:>13}" for c in COLUMNS)
    print(f"{'configuration':<{width}}{heads}")
    for name, row in figures.items():
        print(f"{name:<{width}}" + "".join(f"{run._fmt(row[c]):>13}" for c in COLUMNS))
    print(f"\n{'against default (above 1: more)':<{width}}{heads}")
    base = figures["default"]
    for name, row in figures.items():
        print(f"{name:<{width}}" + "".join(
            f"{run._fmt(row[c] / base[c] if base[c] else None):>13}" for c in COLUMNS))
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end"
          + (f"; left out: {', '.join(skipped)}" if skipped else ""))


if __name__ == "__main__":
    main()
