"""MCP servers as pipeline tools (`codemode._mcp.client`), against real server processes."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import pytest_asyncio

from codemode._mcp.client import (
    McpCallTimeout,
    McpServer,
    McpServerDied,
    McpStartError,
    McpToolError,
)
from codemode._mcp.servers import connect_servers
from codemode.fixtures.git_repo import AUTHORS, MAIN_COMMITS, make_repo
from codemode.pipeline import AbortedError, Session, Signal
from tests.conftest import TIME_SERVER, git_server

# One event loop for the module, so that servers connected once (module fixtures, set up in
# their own task) serve many tests (each in its own task).
pytestmark = [pytest.mark.mcp, pytest.mark.asyncio(loop_scope="module")]

# A stdio server with tools that misbehave on purpose. PID_FILE (env) receives its pid.
SCRIPT = textwrap.dedent('''
    import os, sys, time
    from mcp.server.mcpserver import MCPServer
    from mcp.types import CallToolResult, TextContent, ToolAnnotations

    if os.environ.get("PID_FILE"):
        with open(os.environ["PID_FILE"], "w") as f:
            f.write(str(os.getpid()))

    server = MCPServer("scripted")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    def echo(text: str) -> str:
        """Return text."""
        return text

    @server.tool()
    def crash() -> str:
        """Exit the process without answering."""
        sys.stderr.write("crashing on purpose\\n")
        sys.stderr.flush()
        os._exit(1)

    @server.tool()
    def refuse(reason: str) -> CallToolResult:
        """Answer with isError and the given text."""
        return CallToolResult(is_error=True, content=[TextContent(type="text", text=reason)])

    @server.tool()
    def nap(seconds: float) -> float:
        """Sleep, then return the seconds slept (structured: {"result": seconds}, unwrapped)."""
        time.sleep(seconds)
        return seconds

    @server.tool(structured_output=False)
    def quit_soon() -> str:
        """Answer, then exit 0.2 s later."""
        import threading
        threading.Timer(0.2, os._exit, args=(0,)).start()
        return "bye"

    @server.tool()
    def pid() -> int:
        return os.getpid()

    server.run()
''')


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    path = tmp_path_factory.mktemp("script") / "scripted_server.py"
    path.write_text(SCRIPT, encoding="utf-8")
    return [sys.executable, str(path)]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture repository, shared by the tests that only read it."""
    return make_repo(tmp_path_factory.mktemp("shared") / "repo")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def time_server():
    async with await McpServer.connect(TIME_SERVER) as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def git(repo):
    async with await McpServer.connect(git_server(repo)) as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def scripted(script):
    """A shared scripted server; tests that kill or close one start their own."""
    async with await McpServer.connect(script, name="scripted") as server:
        yield server


async def _gone(pid: int, within_s: float = 15.0) -> bool:
    """Whether process `pid` no longer exists (reaped) within `within_s` seconds. Waits on
    the loop: asyncio reaps its child processes there, and until it does, an exited one is
    a zombie that `kill(pid, 0)` still finds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        await asyncio.sleep(0.02)
    return False


async def _until_dead(server: McpServer, within_s: float = 15.0) -> bool:
    """Whether `server.alive` turns false within `within_s` seconds."""
    deadline = time.monotonic() + within_s
    while server.alive and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return not server.alive


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


# ---- the time server ---------------------------------------------------------------------

async def test_time_server_tools_become_definitions(time_server):
    server = time_server
    assert server.name == "mcp_server_time"
    assert server.server_info.name == "mcp-time"
    assert [d.name for d in server.definitions] == ["get_current_time", "convert_time"]
    by_name = {d.name: d for d in server.definitions}
    for tool in server.tools:
        defn = by_name[tool.name]
        assert defn.parameters == tool.input_schema
        assert defn.output_schema == tool.output_schema
        assert defn.description == tool.description
        assert defn.is_concurrency_safe is not None        # readOnlyHint: true
        assert defn.is_concurrency_safe({}) is True
    assert by_name["convert_time"].parameters["required"] == [
        "source_timezone", "time", "target_timezone"]
    assert by_name["get_current_time"].output_schema["required"] == [
        "timezone", "datetime", "day_of_week", "is_dst"]


async def test_convert_time_returns_structured_content(time_server):
    value = await time_server.call("convert_time", {
        "source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
    day = value["source"]["datetime"][:10]
    weekday = dt.date.fromisoformat(day).strftime("%A")
    assert value == {
        "source": {"timezone": "UTC", "datetime": f"{day}T12:00:00+00:00",
                   "day_of_week": weekday, "is_dst": False},
        "target": {"timezone": "Asia/Tokyo", "datetime": f"{day}T21:00:00+09:00",
                   "day_of_week": weekday, "is_dst": False},
        "time_difference": "+9.0h",
    }


async def test_get_current_time_is_now(time_server):
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    value = await time_server.call("get_current_time", {"timezone": "UTC"})
    after = dt.datetime.now(dt.UTC)
    assert sorted(value) == ["datetime", "day_of_week", "is_dst", "timezone"]
    stamp = dt.datetime.fromisoformat(value["datetime"])
    assert before <= stamp <= after
    assert value["timezone"] == "UTC"
    assert value["day_of_week"] == stamp.strftime("%A")
    assert value["is_dst"] is False


async def test_server_error_result_raises_with_its_text(time_server):
    server = time_server
    with pytest.raises(McpToolError) as caught:
        await server.call("get_current_time", {"timezone": "Mars/Olympus"})
    assert str(caught.value) == ("Error executing tool get_current_time: Invalid timezone: "
                                 "'No time zone found with key Mars/Olympus'")
    assert caught.value.code == "TOOL_ERROR"
    assert caught.value.server == "mcp_server_time"
    with pytest.raises(McpToolError) as unknown:          # a JSON-RPC error
        await server.call("get_weather", {"city": "Paris"})
    assert str(unknown.value) == "Unknown tool: get_weather"
    # the connection is still usable after both failures
    value = await server.call("get_current_time", {"timezone": "Asia/Tokyo"})
    assert value["timezone"] == "Asia/Tokyo"


# ---- the git server ----------------------------------------------------------------------

async def test_git_status_log_and_branch(git, repo):
    names = [d.name for d in git.definitions]
    assert {"git_status", "git_log", "git_branch", "git_show", "git_diff"} <= set(names)
    path = str(repo)
    status = await git.call("git_status", {"repo_path": path})
    log = await git.call("git_log", {"repo_path": path, "max_count": 4})
    local = await git.call("git_branch", {"repo_path": path, "branch_type": "local"})
    login_tip = _git(repo, "rev-parse", "feature/login")
    containing = await git.call("git_branch", {
        "repo_path": path, "branch_type": "local", "contains": login_tip})

    assert status == ("Repository status:\nOn branch main\nChanges not staged for commit:\n"
                      "\tmodified:   README.md\n\nUntracked files:\n\tTODO.txt\n\n"
                      "no changes added to commit")
    shas = _git(repo, "rev-list", "main").split()
    authors = ["ada", "alan", "grace", "ada"]
    dates = ["2024-01-04 16:45:00+00:00", "2024-01-03 14:15:00+00:00",
             "2024-01-02 10:30:00+00:00", "2024-01-01 09:00:00+00:00"]
    entries = [f"Commit: {sha}\nAuthor: {AUTHORS[who][0]}\nDate: {when}\nMessage: {subject}\n\n"
               for sha, who, when, subject in zip(shas, authors, dates, MAIN_COMMITS, strict=True)]
    assert log == "Commit history:\n" + "\n".join(entries)
    assert local == "  feature/login\n  fix/typo\n* main"
    assert containing == "  feature/login"


async def test_git_errors_are_tool_errors(git, repo, tmp_path):
    with pytest.raises(McpToolError) as outside:
        await git.call("git_status", {"repo_path": str(tmp_path)})
    assert str(outside.value) == (
        f"Error executing tool git_status: Repository path '{tmp_path}' is outside the "
        f"allowed repository '{repo}'")
    with pytest.raises(McpToolError) as missing_arg:
        await git.call("git_log", {})
    assert "repo_path" in str(missing_arg.value)
    with pytest.raises(McpToolError) as bad_revision:
        await git.call("git_show", {"repo_path": str(repo), "revision": "release/2.0"})
    assert str(bad_revision.value) == ("Error executing tool git_show: Ref 'release/2.0' did "
                                       "not resolve to an object")


# ---- starting ----------------------------------------------------------------------------

async def test_missing_command_fails_fast():
    started = time.monotonic()
    with pytest.raises(McpStartError) as caught:
        await McpServer.connect("no-such-mcp-server-xyz --flag")
    assert time.monotonic() - started < 5.0                 # not the 20 s startup timeout
    assert caught.value.command == ("no-such-mcp-server-xyz", "--flag")
    assert caught.value.code == "MCP_START_FAILED"
    assert str(caught.value) == (
        "MCP server 'no-such-mcp-server-xyz' (no-such-mcp-server-xyz --flag) could not be "
        "started: command not found (No such file or directory)\n(no stderr output)")


async def test_server_that_exits_at_once_fails_with_its_stderr():
    argv = [sys.executable, "-c",
            "import sys; sys.stderr.write('config file not found\\n'); sys.exit(1)"]
    started = time.monotonic()
    with pytest.raises(McpStartError) as caught:
        await McpServer.connect(argv, name="broken")
    assert time.monotonic() - started < 10.0                # not the 20 s startup timeout
    assert caught.value.stderr_tail == "config file not found\n"
    assert str(caught.value).startswith("MCP server 'broken' (")
    assert str(caught.value).endswith(
        ") exited or closed its stdout before answering\nstderr:\nconfig file not found")


async def test_silent_exit_also_fails():
    with pytest.raises(McpStartError) as caught:
        await McpServer.connect([sys.executable, "-c", "import sys; sys.exit(1)"])
    assert caught.value.stderr_tail == ""
    assert str(caught.value).endswith("exited or closed its stdout before answering\n"
                                      "(no stderr output)")


@pytest.mark.slow
async def test_handshake_timeout_stops_the_process(tmp_path):
    pid_file = tmp_path / "pid"
    argv = [sys.executable, "-c",
            f"import os, sys, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
            "print('waiting for a license server', file=sys.stderr, flush=True); "
            "time.sleep(60)"]
    started = time.monotonic()
    with pytest.raises(McpStartError) as caught:     # long enough for the child to start
        await McpServer.connect(argv, name="mute", startup_timeout_s=3)
    assert time.monotonic() - started < 20.0         # not the child's 60 s
    assert str(caught.value).startswith("MCP server 'mute' (")
    assert str(caught.value).endswith(") did not complete the MCP handshake within 3 s\n"
                                      "stderr:\nwaiting for a license server")
    assert caught.value.stderr_tail == "waiting for a license server\n"
    assert await _gone(int(pid_file.read_text()))


async def test_bad_arguments_are_rejected_before_starting():
    with pytest.raises(ValueError, match="empty MCP server command"):
        await McpServer.connect("")
    with pytest.raises(ValueError, match="must be positive"):
        await McpServer.connect(["x"], call_timeout_s=0)


# ---- failures while running ----------------------------------------------------------------

async def test_server_killed_mid_call_fails_promptly(script):
    server = await McpServer.connect(script, name="scripted")
    try:
        assert await server.call("echo", {"text": "hi"}) == "hi"
        started = time.monotonic()
        with pytest.raises(McpServerDied) as caught:
            await server.call("crash", {})
        assert time.monotonic() - started < 10.0          # not the 60 s call timeout
        assert caught.value.code == "MCP_SERVER_DIED"
        assert str(caught.value) == ("MCP server 'scripted' closed the connection while "
                                     "'crash' was running\nstderr:\ncrashing on purpose")
        assert await _until_dead(server)
        started = time.monotonic()
        with pytest.raises(McpServerDied) as later:       # later calls fail at once
            await server.call("echo", {"text": "again"})
        assert time.monotonic() - started < 5.0           # not the 60 s call timeout
        assert str(later.value) == ("MCP server 'scripted' is not running (it exited "
                                    "earlier)\nstderr:\ncrashing on purpose")
    finally:
        await server.aclose()
    assert not server.alive


async def test_server_exiting_between_calls_is_noticed(script):
    async with await McpServer.connect(script, name="scripted") as server:
        pid = await server.call("pid", {})
        assert await server.call("quit_soon", {}) == "bye"
        assert await _until_dead(server)                  # no call needed to notice
        assert await _gone(pid)
        with pytest.raises(McpServerDied, match="is not running"):
            await server.call("echo", {"text": "x"})


async def test_is_error_result_raises_with_the_servers_text(scripted):
    with pytest.raises(McpToolError) as caught:
        await scripted.call("refuse", {"reason": "quota exceeded for user 7"})
    assert str(caught.value) == "quota exceeded for user 7"
    assert caught.value.message == "quota exceeded for user 7"


async def test_call_timeout_leaves_the_server_usable(scripted):
    started = time.monotonic()
    with pytest.raises(McpCallTimeout) as caught:
        await scripted.call("nap", {"seconds": 10}, timeout_s=0.3)
    assert time.monotonic() - started < 5.0                 # not the 10 s nap
    assert caught.value.code == "TOOL_TIMEOUT"
    assert str(caught.value) == ("MCP tool 'nap' on server 'scripted' did not answer "
                                 "within 0.3 s")
    assert await scripted.call("echo", {"text": "still here"}) == "still here"


@pytest.mark.slow
async def test_call_timeout_defaults_to_the_servers(script):
    async with await McpServer.connect(script, name="scripted", call_timeout_s=0.2) as server:
        assert await server.call("nap", {"seconds": 0}) == 0.0
        with pytest.raises(McpCallTimeout, match=r"did not answer within 0\.2 s"):
            await server.call("nap", {"seconds": 2})


async def test_aborting_the_signal_cancels_the_call(scripted):
    signal = Signal()
    asyncio.get_running_loop().call_later(0.2, signal.abort)
    started = time.monotonic()
    with pytest.raises(AbortedError):
        await scripted.call("nap", {"seconds": 10}, signal=signal)
    assert time.monotonic() - started < 5.0                 # not the 10 s nap
    with pytest.raises(AbortedError):                  # already aborted: not sent
        await scripted.call("echo", {"text": "x"}, signal=signal)


@pytest.mark.slow
async def test_calls_from_several_tasks_overlap(scripted):
    started = time.monotonic()
    values = await asyncio.gather(*(scripted.call("nap", {"seconds": 1.5}) for _ in range(4)))
    elapsed = time.monotonic() - started
    assert values == [1.5] * 4
    assert elapsed < 0.6 * 4 * 1.5                          # serially: 6 s; overlapping: 1.5 s


# ---- closing -------------------------------------------------------------------------------

async def test_close_from_another_task_stops_the_process(script):
    server = await asyncio.create_task(McpServer.connect(script, name="scripted"))
    pid = await server.call("pid", {})
    assert server.alive
    await asyncio.create_task(server.aclose())
    assert not server.alive
    assert await _gone(pid)
    await server.aclose()                                   # idempotent
    with pytest.raises(ValueError, match="closed"):
        await server.call("echo", {"text": "x"})


@pytest.mark.slow
async def test_close_fails_a_pending_call(script):
    server = await McpServer.connect(script, name="scripted")
    pending = asyncio.create_task(server.call("nap", {"seconds": 30}))
    await asyncio.sleep(0.3)
    started = time.monotonic()
    await server.aclose()
    with pytest.raises(McpServerDied):
        await pending
    assert time.monotonic() - started < 15.0                # not the 30 s nap


@pytest.mark.slow
async def test_connect_servers_closes_everything(script, tmp_path, repo):
    pid_file = tmp_path / "pid"
    git_command = f"{sys.executable} -m mcp_server_git --repository {repo}"   # split by shlex
    async with connect_servers([script, git_command],
                               env={"PID_FILE": str(pid_file)}) as servers:
        assert [s.name for s in servers] == ["scripted_server", "mcp_server_git"]
        assert servers[1].command == (sys.executable, "-m", "mcp_server_git",
                                      "--repository", str(repo))
        assert await servers[0].call("echo", {"text": "a"}) == "a"
        assert (await servers[1].call("git_branch", {"repo_path": str(repo),
                                                     "branch_type": "local"})).endswith("* main")
        pid = int(pid_file.read_text())
    assert [s.alive for s in servers] == [False, False]
    assert await _gone(pid)


async def test_connect_servers_closes_the_started_ones_when_one_fails(script, tmp_path):
    pid_file = tmp_path / "pid"
    with pytest.raises(McpStartError) as caught:
        async with connect_servers([script, "no-such-mcp-server-xyz"],
                                   env={"PID_FILE": str(pid_file)}):
            pytest.fail("entered despite a failed server")
    assert caught.value.command == ("no-such-mcp-server-xyz",)
    assert await _gone(int(pid_file.read_text()))


# ---- through the pipeline --------------------------------------------------------------------

@pytest.mark.slow
async def test_definitions_run_through_a_session(scripted, tmp_path):
    session = Session(tools=scripted.definitions, log=str(tmp_path / "session.jsonl"))
    try:
        ok = await session.call("echo", {"text": "hello"})
        refused = await session.call("refuse", {"reason": "not on weekends"})
    finally:
        session.log.close()
    assert (ok.is_error, ok.value) == (False, "hello")
    assert refused.is_error
    assert refused.error.message == "not on weekends"
    assert (refused.error.info.name, refused.error.info.code) == ("McpToolError", "TOOL_ERROR")
