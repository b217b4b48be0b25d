"""Fixtures shared by every test package: the repository root on `sys.path`, the test git
repository and the commands that start the real MCP servers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from codemode.fixtures.git_repo import make_repo  # noqa: E402

TIME_SERVER = (sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC")
"""argv of the reference time server, its local timezone pinned to UTC."""


def git_server(repo: Path) -> tuple[str, ...]:
    """argv of the reference git server, confined to `repo`."""
    return (sys.executable, "-m", "mcp_server_git", "--repository", str(repo))


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A fresh copy of the deterministic repository of `fixtures.git_repo` (dirty tree)."""
    return make_repo(tmp_path / "repo")



@pytest.fixture(scope="session", autouse=True)
def warm_sandbox_component() -> None:
    """Build/load the guest component once before any test, so the first test that runs a
    program does not pay for it (on a fresh machine: ~15 s) and timing-sensitive tests
    measure only the run."""
    from codemode.sandbox import RunRequest, WasmSandbox

    WasmSandbox().run(RunRequest(code="0"), lambda batch: '{"results": []}')
