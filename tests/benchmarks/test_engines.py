"""`python -m benchmarks.engines`: the sandbox under other Engine configurations."""

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import engines

ROOT = Path(__file__).resolve().parents[2]


def test_an_unknown_configuration_is_a_usage_error_naming_the_option():
    done = subprocess.run([sys.executable, "-m", "benchmarks.engines", "--only", "fast"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "argument --only: invalid choice: 'fast'" in done.stderr.splitlines()[-1]


@pytest.mark.slow
def test_a_pooling_configuration_runs_the_sandbox_and_keeps_its_limits(monkeypatch):
    """The variant's Engine serves fresh runs, and the memory limit, the deadline and
    fuel still end a run (what a configuration must keep to be compared at all)."""
    from codemode.sandbox import (
        FuelExhausted,
        MemoryLimitExceeded,
        RunRequest,
        SandboxLimits,
        SubCallReply,
        TimeLimitExceeded,
        WasmSandbox,
        _component,
    )

    monkeypatch.setattr(_component.EngineConfig, "build", _component.EngineConfig.build)
    monkeypatch.setattr(_component, "_runtimes", {})
    engines.apply("pooling, keep 16 MiB")
    sandbox = WasmSandbox()

    def run(code, **limits):
        return sandbox.run(RunRequest(code=code, limits=SandboxLimits(**limits)),
                           lambda batch: SubCallReply())
    assert run("x = 1\nx").value == 1
    grown = run("b = bytearray(200 * 2**20)", memory_bytes=64 * 2**20)
    assert grown.status == "limit" and isinstance(grown.error, MemoryLimitExceeded), grown
    late = run("while True:\n    pass", wall_clock_s=0.5)
    assert late.status == "limit" and isinstance(late.error, TimeLimitExceeded), late
    spent = run("while True:\n    pass", fuel=10**7)
    assert spent.status == "limit" and isinstance(spent.error, FuelExhausted), spent
