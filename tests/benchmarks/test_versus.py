"""`python -m benchmarks.versus`: the sandbox against eryx, runs alternating in one process."""

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import _peers, run, versus

ROOT = Path(__file__).resolve().parents[2]


def test_bad_rounds_are_a_usage_error_naming_the_option():
    done = subprocess.run([sys.executable, "-m", "benchmarks.versus", "--rounds", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "python -m benchmarks.versus: error: argument --rounds: must be at least 1, got 0")


@pytest.mark.slow
def test_every_program_is_timed_for_both_peers_and_each_run_costs_something():
    if "eryx" not in _peers.available():
        pytest.skip("pyeryx is not installed (the bench extra, Python 3.12+)")
    walls, spent = versus.measure(1)
    for program in ("x = 1", *run.WORKLOADS):
        assert len(walls[("sandbox", program)]) == len(walls[("eryx", program)]) >= 1
    assert len(walls[("sandbox", "x = 1")]) == versus.TRIVIAL_REPEATS
    assert all(cpu > 0 for cpu, _faults in spent.values())
