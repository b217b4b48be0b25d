"""A labelled tool whose body ran brings its labels whatever way it failed (docs/codemode.md
"Labels"): the program reads the data from the exception, so a later `send_*` under a
`run_has` rule must pause, naming the label, for every failure a body can end in, native
or over MCP, on both tiers. A call refused before its body brings nothing."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from typing import Any

import pytest

from codemode import Policy, Session, tool
from codemode._mcp.client import McpServer
from codemode.pipeline import HarnessError
from codemode.pipeline import _errors as pipeline_errors
from codemode.pipeline.log import MemoryLog

SECRET = "the launch code is 0000-1111-2222"


def _typed_errors() -> list[type[HarnessError]]:
    """Every typed error of the pipeline (a body may raise any of them)."""
    found, todo = [], [HarnessError]
    while todo:
        kind = todo.pop()
        found.append(kind)
        todo.extend(kind.__subclasses__())
    return sorted({k for k in found if k.__module__ == pipeline_errors.__name__},
                  key=lambda k: k.__name__)


TYPED = _typed_errors()


def _raise(kind: type[BaseException]) -> Any:
    try:
        error = kind(SECRET)
    except TypeError:                      # errors whose constructor takes more
        error = kind.__new__(kind)
        error.args = (SECRET,)
    raise error


FAILURES: dict[str, Any] = {
    "exception": lambda: _raise(RuntimeError),
    "system-exit": lambda: _raise(SystemExit),
    "keyboard-interrupt": lambda: _raise(KeyboardInterrupt),
    "bad-output": lambda: {"not": SECRET},          # the tool says it returns an int
    **{f"typed-{kind.__name__}": (lambda kind=kind: _raise(kind)) for kind in TYPED},
}


def _session(failure: str) -> tuple[Session, list[dict]]:
    sent: list[dict] = []

    @tool(labels=["private"])
    def read_secret() -> int:
        """The secret, as a number."""
        return FAILURES[failure]()

    @tool
    def send_note(text: str) -> str:
        """Send a note."""
        sent.append({"text": text})
        return "sent"

    return Session(tools=[read_secret, send_note], log=MemoryLog()), sent


PROGRAM = """\
try:
    read_secret()
    seen = "no failure"
except ToolCallError as exc:
    seen = exc.code + ": " + exc.message
send_note(text=seen)
"""


def test_the_failures_cover_every_typed_error():
    assert len(TYPED) > 15 and {"ToolTimeoutError", "HookError"} <= {k.__name__ for k in TYPED}


@pytest.mark.slow
@pytest.mark.parametrize("tier", ["wasm", "restricted"])
@pytest.mark.parametrize("failure", sorted(FAILURES))
async def test_a_failed_labelled_call_still_brings_its_label(tier: str, failure: str):
    session, sent = _session(failure)
    Policy.from_data({"tier": tier, "type_check": "off", "rules": [
        {"tool": "send_*", "action": "ask", "when": {"run_has": "private"}}]}).apply(session)
    result = await session.call("run_code", {"code": PROGRAM})
    assert sent == [], f"{failure}: sent {sent}"
    assert result.value["status"] == "pending", result.text
    if failure == "typed-ApprovalPendingError":     # the call itself waits: nothing was read
        assert [a["toolName"] for a in result.value["approvals"]] == ["read_secret"]
        return
    assert result.value["labels"] == {"private": [f"{result.value['run_id']}:code:1"]}
    assert 'holds "private" from read_secret' in result.value["approvals"][0]["reason"]
    session.close()


@pytest.mark.parametrize("tier", ["wasm", "restricted"])
async def test_a_call_refused_before_its_body_brings_nothing(tier: str):
    session, sent = _session("exception")
    Policy.from_data({"tier": tier, "type_check": "off", "rules": [
        {"tool": "read_secret", "action": "deny"},
        {"tool": "send_*", "action": "ask", "when": {"run_has": "private"}}]}).apply(session)
    result = await session.call("run_code", {"code": PROGRAM})
    assert not result.is_error, result.text
    assert sent == [{"text": 'DENIED: policy denies tool "read_secret"'}]
    assert "labels" not in result.value
    session.close()


MCP_SERVER = textwrap.dedent('''
    from mcp.server.mcpserver import MCPServer
    from mcp.shared.exceptions import MCPError

    server = MCPServer("secrets")
    SECRET = %r

    @server.tool()
    def fails() -> int:
        raise RuntimeError(SECRET)

    @server.tool()
    def rpc_error(code: int) -> int:
        raise MCPError(code, SECRET, {"secret": SECRET})

    server.run()
''') % SECRET


@pytest.mark.slow
@pytest.mark.mcp
@pytest.mark.parametrize("tier", ["wasm", "restricted"])
async def test_an_mcp_server_s_failure_brings_the_tool_s_label(tmp_path, tier: str):
    path = tmp_path / "secrets_server.py"
    path.write_text(MCP_SERVER, encoding="utf-8")
    async with await McpServer.connect([sys.executable, str(path)], name="secrets") as server:
        sent: list[str] = []

        @tool
        def send_note(text: str) -> str:
            """Send a note."""
            sent.append(text)
            return "sent"

        for call in ("fails()", "rpc_error(code=-32001)", "rpc_error(code=-32600)",
                     "rpc_error(code=-32603)", "rpc_error(code=-32000)"):
            session = Session(tools=[*server.definitions, send_note], log=MemoryLog())
            Policy.from_data({"tier": tier, "type_check": "off",
                              "labels": [{"tool": "fails", "label": "private"},
                                         {"tool": "rpc_error", "label": "private"}],
                              "rules": [{"tool": "send_*", "action": "ask",
                                         "when": {"run_has": "private"}}]}).apply(session)
            program = PROGRAM.replace("read_secret()", call)
            result = await asyncio.wait_for(session.call("run_code", {"code": program}), 120)
            assert sent == [], (call, sent)
            assert result.value["status"] == "pending", (call, result.text)
            assert "private" in result.value["labels"], call
            session.close()
