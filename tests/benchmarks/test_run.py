"""`python -m benchmarks.run` refuses option values it cannot measure with, before running."""

import subprocess
import sys
from pathlib import Path

import pytest

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
