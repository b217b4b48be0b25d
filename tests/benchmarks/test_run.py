"""`python -m benchmarks.run` refuses option values it cannot measure with, before running."""

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import _peers, run

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("args, message", [
    (["--runs", "0"], "argument --runs: must be at least 1, got 0"),
    (["--subcalls", "0"], "argument --subcalls: must be at least 1, got 0"),
    (["--runs", "-3"], "argument --runs: must be at least 1, got -3"),
    (["--subcalls", "many"], "argument --subcalls: must be a whole number, got 'many'"),
])
def test_bad_counts_are_usage_errors_naming_the_option(args, message):
    done = subprocess.run([sys.executable, "-m", "benchmarks.run", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines()[-1] == f"python -m benchmarks.run: error: {message}"


@pytest.mark.parametrize("args, message", [
    (["--seconds", "0"], "argument --seconds: must be above 0 and finite, got 0"),
    (["--seconds", "soon"], "argument --seconds: must be a number of seconds, got 'soon'"),
])
def test_bad_windows_are_usage_errors_naming_the_option(args, message):
    done = subprocess.run([sys.executable, "-m", "benchmarks.run", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == f"python -m benchmarks.run: error: {message}"


@pytest.mark.parametrize("name", ["restricted", "native", "monty",
                                  pytest.param("eryx", marks=pytest.mark.slow),
                                  pytest.param("harness", marks=pytest.mark.slow)])
def test_peers_compute_the_same_results(name):
    if name not in _peers.available():
        pytest.skip(f"{_peers.NEEDS[name]} is not installed (the bench extra)")
    peer = _peers.make(name)
    try:
        assert {w: peer.run(code) for w, code in run.WORKLOADS.items()} == run.EXPECTED
        assert run.subcall_cost(peer, 10) < 1.0
        assert peer.run(run.one_call(peer)) == 1            # the echo of its one call
    finally:
        peer.close()


def test_ratios_compare_against_native_and_the_fastest_other_sandbox():
    row = [1.0] * len(run.ROWS)
    table = run.render({"sandbox": [4.0] * len(run.ROWS), "monty": [2.0] * len(run.ROWS),
                        "restricted": row, "native": [0.5] * len(run.ROWS)})
    fresh = next(line for line in table.splitlines()[len(run.ROWS) + 2:]
                 if line.startswith("fresh run x = 1, p50"))
    assert fresh.split()[-3:] == ["8", "4", "restricted"]      # 4/0.5 and 4/1
    rate = next(line for line in table.splitlines()[len(run.ROWS) + 2:]
                if line.startswith("fresh runs/s"))
    assert rate.split()[-3:] == ["0.125", "0.5", "monty"]       # higher is better


def test_codemode_columns_are_compared_with_their_counterparts():
    table = run.render({"sandbox": [4.0] * len(run.ROWS), "run_code": [6.0] * len(run.ROWS),
                        "eryx": [2.0] * len(run.ROWS), "harness": [12.0] * len(run.ROWS),
                        "restricted": [1.0] * len(run.ROWS), "native": [0.5] * len(run.ROWS)})
    lines = table.splitlines()[len(run.ROWS) + 2:]
    assert lines[0].split()[-4:] == ["sandbox/eryx", "run_code/harness", "best", "peer"]
    fresh = next(line for line in lines if line.startswith("fresh run x = 1, p50"))
    assert fresh.split()[-3:] == ["2", "0.5", "restricted"]     # 4/2 and 6/12
    rate = next(line for line in lines if line.startswith("fresh runs/s"))
    assert rate.split()[-3:] == ["0.5", "2", "eryx"]            # higher is better


@pytest.mark.slow
@pytest.mark.parametrize("name", ["eryx", "harness"])
def test_counterparts_print_a_first_result_in_a_new_process(name):
    if name not in _peers.available():
        pytest.skip(f"{_peers.NEEDS[name]} is not installed (the bench extra)")
    assert run.first_result(name, spawns=1) > 0
