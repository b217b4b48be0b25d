"""codemode's sandbox against eryx in one process, their runs alternating, so that both see
the same load (`benchmarks.run` measures its peers one after the other, and on a shared
machine the load between them can differ by 2x).

    python -m benchmarks.versus [--rounds 7]

Needs pyeryx (the `bench` extra, Python 3.12+); the first run makes eryx's snapshot (a
minute or more, then kept: `_peers.FACTORY_FILE`). Per round and per program (`x = 1`, 30
runs; then each workload of `benchmarks.run`, one run), a run of each peer in turn. Prints
the median wall time of each and the ratio (sandbox / eryx, above 1: codemode slower), and
per peer the CPU time (user + system, every thread of this process) and the minor page
faults a run of `x = 1` cost this process on average.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

from . import _peers, run

TRIVIAL_REPEATS = 30


def _usage() -> tuple[float, int]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime, own.ru_minflt


def measure(rounds: int) -> tuple[dict[tuple[str, str], list[float]],
                                  dict[str, tuple[float, float]]]:
    """Wall seconds per (peer, program) over `rounds` rounds, and per peer the mean CPU
    seconds and minor page faults of one run of `x = 1`.

    Raises:
        ModuleNotFoundError: pyeryx is not installed.
    """
    peers = {name: _peers.make(name) for name in ("sandbox", "eryx")}
    programs = {"x = 1": run.TRIVIAL, **run.WORKLOADS}
    walls: dict[tuple[str, str], list[float]] = {(n, p): [] for n in peers for p in programs}
    spent = {name: [0.0, 0] for name in peers}
    try:
        for _ in range(rounds):
            for label, code in programs.items():
                for name, peer in peers.items():
                    for _ in range(TRIVIAL_REPEATS if code == run.TRIVIAL else 1):
                        cpu, faults = _usage()
                        started = time.perf_counter()
                        peer.run(code)
                        walls[(name, label)].append(time.perf_counter() - started)
                        cpu_end, faults_end = _usage()
                        if code == run.TRIVIAL:
                            spent[name][0] += cpu_end - cpu
                            spent[name][1] += faults_end - faults
    finally:
        for peer in peers.values():
            peer.close()
    runs = rounds * TRIVIAL_REPEATS
    return walls, {name: (cpu / runs, faults / runs) for name, (cpu, faults) in spent.items()}


def main(argv: list[str] | None = None) -> None:
    """Parse the options, measure and print; a bad option exits 2 naming it."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.versus",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=run._positive_int, default=7,
                        help="rounds of alternating runs (at least 1)")
    args = parser.parse_args(argv)
    walls, spent = measure(args.rounds)
    print(f"{'program':<16}{'sandbox ms':>12}{'eryx ms':>12}{'ratio':>8}")
    for label in ("x = 1", *run.WORKLOADS):
        ours, theirs = (statistics.median(walls[(n, label)]) * 1e3 for n in ("sandbox", "eryx"))
        print(f"{label:<16}{ours:>12.2f}{theirs:>12.2f}{ours / theirs:>8.2f}")
    for name, (cpu, faults) in spent.items():
        print(f"{name}: {cpu * 1e3:.2f} ms CPU and {faults:.0f} page faults per run of x = 1")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
