"""Who may approve under `codemode serve --approvals auto|defer`: `resume_run` decides only
with the operator's approval token in the request's `_meta`, which a model calling the tool
it sees does not send. A real server process, driven by the MCP SDK's client."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from codemode.pipeline import events
from codemode.pipeline.log import open_log
from tests.codemode.mcp.test_serve import (
    APPROVAL_PROGRAM,
    APPROVER,
    EXAMPLE_POLICY,
    LIMIT_S,
    ROOT,
    TOKEN,
    _text,
    structured,
)

pytestmark = [pytest.mark.mcp, pytest.mark.slow]


@pytest.mark.parametrize("approvals", ["auto", "defer"])
async def test_resume_run_without_the_operators_token_decides_nothing(approvals: str,
                                                                      tmp_path: Path):
    log_path = tmp_path / "serve.jsonl"
    env = {**os.environ, "CODEMODE_APPROVAL_TOKEN": TOKEN}
    params = StdioServerParameters(
        command=sys.executable, cwd=str(ROOT), env=env,
        args=["-m", "codemode", "serve", "--builtin", "--policy", str(EXAMPLE_POLICY),
              "--log", str(log_path), "--approvals", approvals])
    async with asyncio.timeout(LIMIT_S):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            pending = structured(await client.call_tool("run_code",
                                                        {"code": APPROVAL_PROGRAM}))
            run_id = pending["run_id"]
            decide = {"run_id": run_id, "approve": [f"{run_id}:1"]}
            # what a model can send: the tool's arguments, with no _meta or a guessed one
            for meta in (None, {}, {"codemode/approvalToken": TOKEN[:-1] + "?"},
                         {"codemode/approvalToken": None}, {"approvalToken": TOKEN}):
                refused = await client.call_tool("resume_run", decide, meta=meta)
                assert refused.is_error and refused.structured_content is None
                assert _text(refused).startswith("Error: APPROVAL_TOKEN_REQUIRED: ")
                assert "the run stays paused" in _text(refused)
            # the run is still paused on the same request, undecided
            resumed = structured(await client.call_tool("resume_run", decide, meta=APPROVER))
            assert [a["id"] for a in resumed["approvals"]] == [f"{run_id}:2"]
    with open_log(log_path) as log:
        decided = [e.outcome for e in log.read() if isinstance(e, events.ApprovalDecided)]
    assert decided == ["allowed-once"]        # only the decision that carried the token


async def test_resume_run_without_a_configured_token_says_how_to_configure_one():
    env = {k: v for k, v in os.environ.items() if k != "CODEMODE_APPROVAL_TOKEN"}
    params = StdioServerParameters(
        command=sys.executable, cwd=str(ROOT), env=env,
        args=["-m", "codemode", "serve", "--builtin", "--policy", str(EXAMPLE_POLICY),
              "--approvals", "defer"])
    async with asyncio.timeout(LIMIT_S):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            run_id = structured(await client.call_tool(
                "run_code", {"code": APPROVAL_PROGRAM}))["run_id"]
            refused = await client.call_tool("resume_run", {
                "run_id": run_id, "approve": [f"{run_id}:1"]}, meta=APPROVER)
            assert refused.is_error
            assert "this server has no approval token" in _text(refused)
            assert "--approval-token-file" in _text(refused)


@pytest.mark.parametrize("token", ["short", "a" * 64])
def test_a_weak_approval_token_is_refused_at_startup(token: str, tmp_path: Path):
    path = tmp_path / "token"
    path.write_text(token, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "codemode", "serve", "--builtin",
                           "--approvals", "defer", "--approval-token-file", str(path)],
                          capture_output=True, text=True, timeout=LIMIT_S, cwd=ROOT,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert "weak approval token" in done.stderr and "secrets.token_urlsafe" in done.stderr



@pytest.mark.parametrize(("approvals", "file", "said"), [
    ("elicit", "token", "--approval-token-file needs --approvals auto or defer"),
    ("auto", "missing", "cannot read the approval token file"),
])
def test_an_approval_token_file_that_cannot_serve_is_a_usage_error(
        approvals: str, file: str, said: str, tmp_path: Path):
    (tmp_path / "token").write_text(TOKEN, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "codemode", "serve", "--builtin",
                           "--approvals", approvals, "--approval-token-file",
                           str(tmp_path / file)],
                          capture_output=True, text=True, timeout=LIMIT_S, cwd=ROOT,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert said in " ".join(done.stderr.split())


def test_a_server_built_in_python_refuses_a_weak_approval_token():
    from codemode import CodeModeServer
    from codemode.pipeline import Session
    from codemode.pipeline.log import MemoryLog

    session = Session(log=MemoryLog())
    with pytest.raises(ValueError, match="weak approval token"):
        CodeModeServer(session, approvals="defer", approval_token="x" * 40)
    assert session.approval is None          # nothing was installed on the session
    server = CodeModeServer(session, approvals="defer", approval_token=TOKEN)
    server.close()
