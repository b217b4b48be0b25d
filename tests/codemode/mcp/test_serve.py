"""`codemode serve`: an MCP client (the SDK's `ClientSession`) drives the server as a real
process, over stdio and streamable HTTP, with real upstream servers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from codemode.fixtures.git_repo import MAIN_COMMITS
from codemode.pipeline import events
from codemode.pipeline.log import open_log
from tests.codemode.cli.test_cli_resume import ASK_POLICY
from tests.conftest import TIME_SERVER, git_server

pytestmark = [pytest.mark.mcp, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE_POLICY = ROOT / "fixtures" / "policies" / "example.toml"
LIMIT_S = 240          # per test: a slow machine makes it slow, never failing

# An upstream with tools that misbehave on purpose. argv: PID_FILE [http PORT]
SCRIPTED = textwrap.dedent('''
    import os, sys, time
    from mcp.server.mcpserver import MCPServer

    with open(sys.argv[1], "w") as f:
        f.write(str(os.getpid()))

    server = MCPServer("scripted")

    @server.tool()
    def nap(seconds: float, marker: str = "") -> float:
        """Sleep, then return the seconds slept; touch `marker` first."""
        if marker:
            open(marker, "w").close()
        time.sleep(seconds)
        return seconds

    @server.tool()
    def shout(text: str) -> str:
        """Upper-case text."""
        return text.upper()

    if len(sys.argv) > 2:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[3]))
    else:
        server.run()
''')


def _command(argv: tuple[str, ...] | list[str]) -> str:
    return shlex.join(argv)


@pytest.fixture
def scripted(tmp_path: Path) -> Path:
    path = tmp_path / "scripted_server.py"
    path.write_text(SCRIPTED, encoding="utf-8")
    return path


@contextlib.asynccontextmanager
async def stdio_serving(*args: str, **client: Any) -> AsyncIterator[ClientSession]:
    """`codemode serve ARGS` over stdio, with an initialized client session."""
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "codemode", "serve", *args],
                                   env=dict(os.environ), cwd=str(ROOT))
    with tempfile.TemporaryFile("w+") as errlog:
        try:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, **client) as session:
                    await session.initialize()
                    yield session
        except BaseException:
            errlog.seek(0)
            sys.stderr.write(f"server stderr:\n{errlog.read()}\n")
            raise


@contextlib.contextmanager
def http_process(argv: list[str], announce: re.Pattern[str]) -> Any:
    """Start a process; yield (process, URL) once stderr matches `announce`."""
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, cwd=ROOT)
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 120
        url = None
        while url is None:
            line = process.stderr.readline()
            if not line:
                raise AssertionError(f"{argv} exited: {''.join(seen)}")
            seen.append(line)
            if (match := announce.search(line)) is not None:
                url = match.group(1)
            assert time.monotonic() < deadline, "".join(seen)
        yield process, url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stderr.close()


async def wait_listening(url: str) -> None:
    """Until the URL's TCP port accepts connections (a process may announce itself a moment
    before it listens)."""
    host, port = re.match(r"http://([^/]+):(\d+)/", url).groups()
    deadline = time.monotonic() + 120
    while True:
        try:
            _, writer = await asyncio.open_connection(host.strip("[]"), int(port))
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens at {url}"
            await asyncio.sleep(0.1)
            continue
        writer.close()
        await writer.wait_closed()
        return


@contextlib.asynccontextmanager
async def http_session(url: str, **client: Any) -> AsyncIterator[ClientSession]:
    """An initialized client session over streamable HTTP."""
    await wait_listening(url)
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, **client) as session:
            await session.initialize()
            yield session


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


BOTH_SERVERS = '''
import asyncio
import json
log = git_log(repo_path=REPO, max_count=10)
subjects = [line.split(": ", 1)[1] for line in log.splitlines() if line.startswith("Message: ")]
tokyo, delhi = await asyncio.gather(
    convert_time(source_timezone="UTC", time="14:30", target_timezone="Asia/Tokyo"),
    convert_time(source_timezone="UTC", time="14:30", target_timezone="Asia/Kolkata"))
print(f"{len(subjects)} commits")
{"subjects": subjects, "tokyo": tokyo["target"]["datetime"][11:16],
 "delhi": delhi["target"]["datetime"][11:16]}
'''
EXPECTED = {"subjects": list(MAIN_COMMITS), "tokyo": "23:30", "delhi": "20:00"}


async def test_stdio_run_code_composes_two_upstream_servers(git_repo: Path, tmp_path: Path):
    log_path = tmp_path / "serve.jsonl"
    messages: list[types.LoggingMessageNotificationParams] = []
    progress: list[tuple[float, str | None]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        messages.append(params)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving("--mcp", _command(TIME_SERVER),
                                 "--mcp", _command(git_server(git_repo)),
                                 "--log", str(log_path), logging_callback=on_log) as client:
            listing = await client.list_tools()
            assert [t.name for t in listing.tools] == ["run_code"]
            [run_code] = listing.tools
            assert "def convert_time(source_timezone: str, time: str, target_timezone: str)" \
                in run_code.description
            assert "def git_log(repo_path: str" in run_code.description
            assert run_code.output_schema["required"] == ["logs", "subcalls"]

            code = f"REPO = {str(git_repo)!r}\n" + BOTH_SERVERS
            result = await client.call_tool("run_code", {"code": code},
                                            progress_callback=on_progress)
            value = structured(result)
            assert value["result"] == EXPECTED
            assert value["logs"] == ["4 commits\n"]
            assert value["subcalls"] == {"total": 3, "failed": 0, "denied": 0,
                                         "by_tool": {"git_log": 1, "convert_time": 2}}
            assert result.content[0].text.startswith("4 commits\n{\n")

            # A direct call of an upstream tool is refused in code mode, by the pipeline.
            direct = await client.call_tool("get_current_time", {"timezone": "UTC"})
            assert direct.is_error
            assert "only `run_code` is callable directly" in direct.content[0].text

    # every sub-call was a log message and a progress notification, before the result
    assert [(m.logger, m.level, m.data["tool"], m.data["ok"]) for m in messages] == [
        ("codemode", "info", name, True) for name in ("git_log", "convert_time", "convert_time")]
    assert {m.data["callId"].rsplit(":", 1)[0].endswith(":code") for m in messages} == {True}
    assert [value for value, _ in progress] == [1.0, 2.0, 3.0]
    assert progress[0][1].startswith("git_log: ok, ")

    # and the server's session log has the calls and sub-calls
    with open_log(log_path) as log:
        logged = log.read()
    calls = [e for e in logged if isinstance(e, events.ToolCall)]
    assert [e.name for e in calls] == ["run_code", "get_current_time"]
    subs = [e for e in logged if isinstance(e, events.CodeDispatch)]
    assert [e.name for e in subs] == ["git_log", "convert_time", "convert_time"]
    assert {e.root_call_id for e in subs} == {calls[0].call_id}


async def test_progress_heartbeats_during_a_long_run():
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving("--builtin") as client:
            code = "import asyncio\nawait asyncio.sleep(2.5)\nadd(a=1, b=2)"
            result = await client.call_tool("run_code", {"code": code},
                                            progress_callback=on_progress)
            assert structured(result)["result"] == 3
            silent = await client.call_tool("run_code", {"code": "add(a=1, b=2)"})
            assert structured(silent)["result"] == 3
    assert any(m is not None and m.startswith("running for ") for m in progress), progress
    assert any(m is not None and m.startswith("add: ok, ") for m in progress), progress


async def test_streamable_http_serves_run_code_and_upstream_tools(git_repo: Path,
                                                                  scripted: Path,
                                                                  tmp_path: Path):
    upstream_port = free_port()
    upstream_argv = [sys.executable, str(scripted), str(tmp_path / "pid"), "http",
                     str(upstream_port)]
    upstream = subprocess.Popen(upstream_argv, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    upstream_url = f"http://127.0.0.1:{upstream_port}/mcp"
    try:
        async with asyncio.timeout(LIMIT_S):
            async with http_session(upstream_url) as probe:     # the upstream is up
                await probe.list_tools()
            argv = [sys.executable, "-m", "codemode", "serve", "--transport", "http",
                    "--host", "127.0.0.1", "--port", "0", "--mode", "both",
                    "--mcp", _command(TIME_SERVER), "--mcp", _command(git_server(git_repo)),
                    "--mcp-url", upstream_url]
            with http_process(argv, re.compile(r"serving MCP at (\S+)")) as (_, url):
                assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", url)
                async with http_session(url) as client:
                    names = [t.name for t in (await client.list_tools()).tools]
                    assert names[0] == "run_code"
                    assert {"get_current_time", "git_log", "shout", "nap"} <= set(names)

                    code = f"REPO = {str(git_repo)!r}\n" + BOTH_SERVERS
                    result = await client.call_tool("run_code", {"code": code})
                    assert structured(result)["result"] == EXPECTED
                    # the scripted upstream's str results arrive unwrapped (the SDK's
                    # {"result": ...} envelope is taken off)
                    code = 'shout(text=get_current_time(timezone="UTC")["timezone"] + "!")'
                    result = await client.call_tool("run_code", {"code": code})
                    assert structured(result)["result"] == "UTC!"

                    direct = await client.call_tool("convert_time", {
                        "source_timezone": "UTC", "time": "09:00", "target_timezone": "Asia/Tokyo"})
                    assert structured(direct)["target"]["datetime"][11:16] == "18:00"
                    shouted = await client.call_tool("shout", {"text": "hi"})
                    # its value is a str: served as text, with no outputSchema to wrap it for
                    assert shouted.structured_content is None
                    assert [block.text for block in shouted.content] == ["HI"]
    finally:
        upstream.terminate()
        upstream.wait(timeout=30)


APPROVAL_PROGRAM = '''
first = sleep_ms(ms=5)
try:
    sleep_ms(ms=6)
    second = "ran"
except ToolDenied as exc:
    second = exc.message
[first, second, get_weather(city="Paris")["city"]]
'''


async def test_an_ask_rule_round_trips_through_elicitation(tmp_path: Path):
    log_path = tmp_path / "serve.jsonl"
    asked: list[types.ElicitRequestParams] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        approve = '"ms": 5' in params.message
        return types.ElicitResult(action="accept", content={"approve": approve})

    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving("--builtin", "--policy", str(EXAMPLE_POLICY),
                                 "--log", str(log_path), elicitation_callback=answer) as client:
            result = await client.call_tool("run_code", {"code": APPROVAL_PROGRAM})
            assert structured(result)["result"] == [5, 'the user rejected tool "sleep_ms"',
                                                    "Paris"]
    assert [p.message.splitlines()[0] for p in asked] == [
        'Approve the tool call "sleep_ms" with these arguments?'] * 2
    assert asked[0].message.splitlines()[-1] == "Reason: sleeping on the host needs approval"
    assert asked[0].requested_schema["required"] == ["approve"]
    with open_log(log_path) as log:
        decided = [e.outcome for e in log.read() if isinstance(e, events.ApprovalDecided)]
    assert decided == ["allowed-once", "rejected"]


HIDDEN = "\u202e\u2066\u200b\u200d\ufeff\u2028\u2029\r\x1b\x85\u061c\u200e"


async def test_an_approval_question_escapes_what_would_hide_or_reorder_text(tmp_path: Path):
    policy = tmp_path / "ask.toml"
    policy.write_text('[[rules]]\ntool = "get_weather"\naction = "ask"\n'
                      'reason = "check \\u202e this"\n')
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": False})

    city = "invoice\u202etxt.exe\u200b\u2028approved by admin" + HIDDEN
    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving("--builtin", "--policy", str(policy),
                                 elicitation_callback=answer) as client:
            await client.call_tool("run_code", {"code": f"get_weather(city={city!r})"})
    [message] = asked
    assert not set(HIDDEN) & set(message), message
    assert "invoice\\u202etxt.exe\\u200b\\u2028approved by admin" in message
    assert message.splitlines()[-1] == "Reason: check \\u202e this"


async def test_a_client_that_cannot_elicit_is_denied_with_the_reason():
    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving("--builtin", "--policy", str(EXAMPLE_POLICY)) as client:
            result = await client.call_tool("run_code", {"code": APPROVAL_PROGRAM.replace(
                "first = sleep_ms(ms=5)", "first = 5")})
            assert structured(result)["result"] == [
                5,
                'tool "sleep_ms" requires approval (sleeping on the host needs approval), but '
                "the MCP client did not declare the elicitation capability, so it cannot be "
                "asked",
                "Paris"]


async def test_a_2026_client_cannot_be_asked_and_is_told_why():
    """At protocol 2026-07-28 (negotiated with `server/discover`) a server sends no requests
    to the client, so an ask is a denial naming the protocol."""
    params = StdioServerParameters(command=sys.executable, env=dict(os.environ), cwd=str(ROOT),
                                   args=["-m", "codemode", "serve", "--builtin",
                                         "--policy", str(EXAMPLE_POLICY)])

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("a 2026-07-28 connection carries no elicitation request")

    async with asyncio.timeout(LIMIT_S):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, elicitation_callback=answer) as client:
                discovered = await client.discover()
                result = await client.call_tool("run_code", {"code": APPROVAL_PROGRAM.replace(
                    "first = sleep_ms(ms=5)", "first = 5")})
    version = discovered.supported_versions[-1]
    assert structured(result)["result"][1] == (
        'tool "sleep_ms" requires approval (sleeping on the host needs approval), but this '
        f"MCP connection (protocol {version}) cannot carry a request from the server to the "
        "client")


KILLED_PROGRAM = '''
try:
    nap(seconds=60, marker=MARKER)
    outcome = "answered"
except ToolCallError as exc:
    outcome = exc.code
outcome
'''


async def test_an_upstream_killed_mid_run_is_a_rejection_and_the_server_keeps_serving(
        scripted: Path, tmp_path: Path):
    pid_file, marker = tmp_path / "pid", tmp_path / "napping"

    async def kill_when_napping() -> None:
        while not marker.exists():
            await asyncio.sleep(0.05)
        os.kill(int(pid_file.read_text()), 9)

    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving("--mcp", _command([sys.executable, str(scripted), str(pid_file)]),
                                 "--mcp", _command(TIME_SERVER)) as client:
            killer = asyncio.ensure_future(kill_when_napping())
            code = f"MARKER = {str(marker)!r}\n" + KILLED_PROGRAM
            result = await client.call_tool("run_code", {"code": code})
            await killer
            assert structured(result)["result"] == "MCP_SERVER_DIED"

            # the server still serves: other upstreams work, the dead one's tools reject
            after = await client.call_tool("run_code", {"code": textwrap.dedent('''
                try:
                    shout(text="x")
                    dead = "answered"
                except ToolCallError as exc:
                    dead = exc.code
                [dead, get_current_time(timezone="UTC")["timezone"]]
            ''')})
            assert structured(after)["result"] == ["MCP_SERVER_DIED", "UTC"]


async def test_an_upstream_timeout_is_a_rejection(scripted: Path, tmp_path: Path):
    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving("--mcp", _command([sys.executable, str(scripted),
                                                    str(tmp_path / "pid")]),
                                 "--mcp-timeout", "1") as client:
            code = KILLED_PROGRAM.replace("nap(seconds=60, marker=MARKER)", "nap(seconds=30)")
            result = await client.call_tool("run_code", {"code": code})
            assert structured(result)["result"] == "TOOL_TIMEOUT"
            quick = await client.call_tool("run_code", {"code": 'shout(text="ok")'})
            assert structured(quick)["result"] == "OK"


async def test_a_failing_program_is_an_error_result_without_structured_content():
    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving("--builtin") as client:
            result = await client.call_tool("run_code", {"code": "1 / 0"})
            assert result.is_error and result.structured_content is None
            assert result.content[0].text.startswith(
                "Error: code run failed (exception): division by zero\n")
            unknown = await client.call_tool("no_such_tool", {})
            assert unknown.is_error


def test_a_bad_upstream_command_exits_2_with_the_reason():
    done = subprocess.run([sys.executable, "-m", "codemode", "serve", "--mcp",
                           "no-such-command-for-codemode"],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert "McpStartError" in done.stderr and "command not found" in done.stderr


# ---- pausing for approval and resume_run ----------------------------------------------------

def _counter(counts: Path) -> str:
    return _command([sys.executable, "-m", "codemode.fixtures.mcp_counter_server", str(counts)])


def _text(result: types.CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


TOKEN = "tok-" + "0123456789abcdefghijklmnopqrstuvwxyz"      # what the operator configured
APPROVER = {"codemode/approvalToken": TOKEN}                   # the operator's client's _meta


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "approval-token"
    path.write_text(TOKEN + "\n", encoding="utf-8")
    return path


async def test_a_client_that_cannot_elicit_gets_a_pending_run_and_resumes_it(
        tmp_path: Path, token_file: Path):
    import jsonschema

    from tests.codemode.run.test_resume import PROGRAM

    counts, log_path, policy = tmp_path / "counts.json", tmp_path / "serve.db", \
        tmp_path / "ask.toml"
    policy.write_text(ASK_POLICY, encoding="utf-8")
    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving("--mcp", _counter(counts), "--policy", str(policy),
                                 "--log", str(log_path), "--approvals", "auto",
                                 "--approval-token-file", str(token_file)) as client:
            listing = {t.name: t for t in (await client.list_tools()).tools}
            assert list(listing) == ["run_code", "resume_run"]
            assert "not for the model" in listing["resume_run"].description
            assert listing["resume_run"].output_schema == listing["run_code"].output_schema

            result = await client.call_tool("run_code", {"code": PROGRAM})
            pending = structured(result)
            jsonschema.validate(pending, listing["run_code"].output_schema)
            run_id = pending["run_id"]
            assert pending["status"] == "pending"
            assert [(a["id"], a["toolName"], a["arguments"], a.get("reason")) for a in
                    pending["approvals"]] == [
                (f"{run_id}:2", "step_b", {"note": "b"},
                 'policy requires approval for tool "step_b"'),
                (f"{run_id}:3", "step_c", {"note": "c"}, "C changes things")]
            assert pending["logs"] == ["start\n", "a ran 1\n"]
            assert "need a person's approval" in _text(result)

            undecided = await client.call_tool("resume_run", {"run_id": run_id,
                                                              "approve": [f"{run_id}:2"]},
                                               meta=APPROVER)
            assert undecided.is_error
            assert f"no decision for pending approval(s): {run_id}:3" in _text(undecided)

            done = await client.call_tool("resume_run", {
                "run_id": run_id, "approve": [f"{run_id}:2"],
                "deny": [{"id": f"{run_id}:3", "reason": "not today"}]}, meta=APPROVER)
            final = structured(done)
            jsonschema.validate(final, listing["resume_run"].output_schema)
            assert final["result"] == "done"
            assert "".join(final["logs"]) == "start\na ran 1\nb: step_b\nc: ToolDenied DENIED\n"

            again = await client.call_tool("resume_run", {
                "run_id": run_id, "approve": [f"{run_id}:2", f"{run_id}:3"]}, meta=APPROVER)
            assert again.is_error and "already resumed" in _text(again)
            unknown = await client.call_tool("resume_run", {"run_id": "nope"}, meta=APPROVER)
            assert unknown.is_error and "holds no suspended run 'nope'" in _text(unknown)

    data = json.loads(counts.read_text())
    assert (data["step_a"], data["step_b"], data.get("step_c", 0)) == (1, 1, 0)
    assert data["keys"] == [f"{run_id}:1", f"{run_id}:2"]
    with open_log(log_path) as log:
        logged = log.read()
    assert [e.run_id for e in logged if isinstance(e, events.ToolSuspended)] == [run_id]
    assert [e.name for e in logged if isinstance(e, events.CodeReplayed)] == ["step_a"]


async def test_approvals_defer_pauses_even_a_client_that_can_elicit(token_file: Path):
    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("--approvals defer elicits nothing")

    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving("--builtin", "--policy", str(EXAMPLE_POLICY),
                                 "--approvals", "defer", "--approval-token-file",
                                 str(token_file), elicitation_callback=answer) as client:
            result = await client.call_tool("run_code", {"code": APPROVAL_PROGRAM})
            pending = structured(result)
            assert [a["toolName"] for a in pending["approvals"]] == ["sleep_ms"]
            run_id = pending["run_id"]
            second = structured(await client.call_tool("resume_run", {
                "run_id": run_id, "approve": [f"{run_id}:1"]}, meta=APPROVER))
            assert [a["id"] for a in second["approvals"]] == [f"{run_id}:2"]
            done = structured(await client.call_tool("resume_run", {
                "run_id": run_id, "deny": [{"id": f"{run_id}:2", "reason": "once is enough"}]},
                meta=APPROVER))
            assert done["result"] == [5, 'the user rejected tool "sleep_ms": once is enough',
                                      "Paris"]


async def test_resume_run_is_not_listed_or_callable_when_approvals_elicit():
    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving("--builtin") as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["run_code"]
            refused = await client.call_tool("resume_run", {"run_id": "x"})
            assert refused.is_error and "resume_run" in _text(refused)


async def test_a_program_with_a_type_error_is_refused_before_any_tool_runs(tmp_path: Path):
    log = tmp_path / "serve.jsonl"
    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving("--builtin", "--log", str(log)) as client:
            code = "add(a=1, b=2)\nadd(a=1, b=2, c=2)\n"
            result = await client.call_tool("run_code", {"code": code})
            assert result.is_error and result.structured_content is None
            text = result.content[0].text
            assert text.startswith("Error: code run failed (type-check): 1 type error "
                                   "(<program>, line 2, column 15: "), text
            assert '  File "<program>", line 2, column 15\n' in text
            assert "[unknown-argument]" in text
            good = await client.call_tool("run_code", {"code": "add(a=1, b=2)"})
            assert structured(good)["result"] == 3
    with open_log(str(log)) as read:
        starts = [e for e in read.read() if isinstance(e, events.CodeDispatchStart)]
    assert len(starts) == 1                     # only the good program's call ran
