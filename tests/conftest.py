"""Shared fixtures."""

import pytest


@pytest.fixture(scope="session", autouse=True)
def warm_sandbox_component():
    """Build/load the guest component once before any test, so the first test that runs
    a program does not pay for it (and timing-sensitive tests measure only the run)."""
    from sandbox import RunRequest, WasmSandbox

    WasmSandbox().run(RunRequest(code="0"), lambda batch: '{"results": []}')
