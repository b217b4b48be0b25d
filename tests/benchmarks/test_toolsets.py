"""`python -m benchmarks.toolsets`: a row per number of tools, measured over a real MCP
server process; option values it cannot measure with are usage errors."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("args, message", [
    (["--counts", "10,0"], "argument --counts: must be at least 1, got 0"),
    (["--counts", "ten"], "argument --counts: must be a whole number, got 'ten'"),
    (["--runs", "0"], "argument --runs: must be at least 1, got 0"),
])
def test_bad_values_are_usage_errors_naming_the_option(args, message):
    done = subprocess.run([sys.executable, "-m", "benchmarks.toolsets", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == f"python -m benchmarks.toolsets: error: {message}"


@pytest.mark.slow
def test_a_row_per_count_with_the_description_within_its_budget():
    done = subprocess.run([sys.executable, "-m", "benchmarks.toolsets", "--counts", "3,120",
                           "--runs", "1"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    header, few, many = done.stdout.splitlines()
    assert header.split() == ["tools", "connect", "setup", "desc", "full", "first", "run",
                              "index", "search", "describe"]
    few_cells, many_cells = few.split(), many.split()
    assert few_cells[0] == "3" and few_cells[3] == few_cells[4]       # the full listing
    assert many_cells[0] == "120"
    assert int(many_cells[3]) <= 50_000 < int(many_cells[4])          # an index instead
    assert all(float(cell) > 0 for cell in many_cells[5:])
