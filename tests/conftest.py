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
def seal_key_of_the_tests(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Paused runs are sealed with a key made on first use in a file of the tests' own
    (`CODEMODE_SEAL_KEY_FILE`), never in the user's config directory; processes the
    tests start inherit it."""
    import os

    os.environ["CODEMODE_SEAL_KEY_FILE"] = str(tmp_path_factory.mktemp("seal") / "seal.key")
    os.environ.pop("CODEMODE_SEAL_KEY", None)


@pytest.fixture(scope="session", autouse=True)
def warm_sandbox_component() -> None:
    """Build/load the guest component once before any test, so the first test that runs a
    program does not pay for it (on a fresh machine: ~15 s) and timing-sensitive tests
    measure only the run."""
    from codemode.sandbox import RunRequest, WasmSandbox

    WasmSandbox().run(RunRequest(code="0"), lambda batch: '{"results": []}')


_LOG_SUFFIXES = (".jsonl", ".db", ".sqlite", ".sqlite3")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "log_unchecked(reason): the test writes a session log that breaks the log "
                   "invariants on purpose (a simulated crash, a hand-made bad log)")


@pytest.fixture(autouse=True)
def session_logs_keep_their_invariants(request: pytest.FixtureRequest):
    """After each test that used `tmp_path`, every session log under it (JSONL or SQLite,
    written by the test or by a process it started) must keep the log invariants
    (`codemode.pipeline.log.check`, docs/pipeline-spec.md §10). Files that are not session logs (or
    are corrupt on purpose) do not decode and are skipped; a test whose log breaks the
    invariants on purpose says so with `@pytest.mark.log_unchecked(reason)`."""
    if "tmp_path" not in request.fixturenames or request.node.get_closest_marker("log_unchecked"):
        yield
        return
    root: Path = request.getfixturevalue("tmp_path")     # now, so it outlives this teardown
    yield
    from codemode.pipeline import LogCorruptError
    from codemode.pipeline.log import check, load

    broken = []
    for path in sorted(root.rglob("*")):
        if path.suffix.lower() not in _LOG_SUFFIXES or not path.is_file():
            continue
        try:
            events = load(path)
        except (LogCorruptError, OSError, ValueError):
            continue
        broken += [f"{path.name}: seq {v.seq}: {v.kind.value}: {v.message}" for v in check(events)]
    assert not broken, "session log invariants broken:\n" + "\n".join(broken)
