"""`codemode serve --approve-plans` (docs/codemode.md "Plan before the run"): a program's
calls that ask are put to the client in ONE elicitation for the whole plan, then the program
runs following the answer, each approved call once. A real server process with a real
upstream mailbox server (what it sends is appended to a file), driven by the MCP SDK's
client."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from codemode.pipeline import events
from codemode.pipeline.log import open_log
from tests.codemode.mcp.test_serve import LIMIT_S, _text, stdio_serving, structured

pytestmark = [pytest.mark.mcp, pytest.mark.slow]

NAMES = ["ann", "bob", "cy", "dee", "eve"]

FIVE_MAILS = '''
out = []
for name in ["ann", "bob", "cy", "dee", "eve"]:
    try:
        out.append(send_email(to=name + "@example.com", subject="hi", body="hello " + name))
    except ToolDenied as exc:
        out.append(exc.message)
out
'''

POLICY = ('[[rules]]\ntool = "send_email"\naction = "ask"\n'
          'reason = "mail leaves the \\u202ehouse"\n')


def _serve(tmp_path: Path, *more: str) -> list[str]:
    (tmp_path / "ask.toml").write_text(POLICY)
    mailbox = f"{sys.executable} -m codemode.fixtures.mcp_mailbox_server {tmp_path / 'out.jsonl'}"
    return ["--mcp", mailbox, "--policy", str(tmp_path / "ask.toml"),
            "--log", str(tmp_path / "serve.jsonl"), *more]


def _sent(tmp_path: Path) -> list[str]:
    outbox = tmp_path / "out.jsonl"
    if not outbox.exists():
        return []
    return [json.loads(line)["to"] for line in outbox.read_text().splitlines()]


@pytest.mark.parametrize(("answer", "refused"), [
    ({"approve": True}, {}),
    ({"approve": True, "deny": " 2,4 ", "reason": "not today"}, {2: "not today", 4: "not today"}),
])
async def test_five_mails_are_asked_about_once_and_each_sent_once(
        tmp_path: Path, answer: dict[str, Any], refused: dict[int, str]):
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content=answer)

    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving(*_serve(tmp_path, "--approve-plans"),
                                 elicitation_callback=elicit) as client:
            result = structured(await client.call_tool("run_code", {"code": FIVE_MAILS}))
    [question] = asked                                    # one elicitation for five calls
    lines = question.message.splitlines()
    assert lines[0].startswith("Approve these 5 tool calls of one program at once?")
    assert lines[1] == ('1. send_email({"body": "hello ann", "subject": "hi", "to": '
                        '"ann@example.com"}) (mail leaves the \\u202ehouse)')   # escaped
    assert [line.split(".")[0] for line in lines[1:6]] == ["1", "2", "3", "4", "5"]
    assert set(question.requested_schema["properties"]) == {"approve", "deny", "reason"}
    assert _sent(tmp_path) == [f"{n}@example.com" for i, n in enumerate(NAMES, 1)
                               if i not in refused]        # each once, in order
    for i, value in enumerate(result["result"], 1):
        if i in refused:   # a binding rejection the program caught
            assert value.startswith(f'the user rejected tool "send_email": {refused[i]} '
                                    "(plan approval "), value
            assert value.endswith(f", entry {i})")
        else:
            assert value == f"sent to {NAMES[i - 1]}@example.com"
    with open_log(tmp_path / "serve.jsonl") as log:
        decided = [e for e in log.read() if isinstance(e, events.ApprovalDecided)]
    assert [(e.outcome, e.by.rsplit(" ", 1)[-1]) for e in decided] == [
        ("rejected" if i in refused else "allowed-once", str(i)) for i in range(1, 6)]


@pytest.mark.parametrize(("action", "content", "says"), [
    ("cancel", None, "the plan's approval was cancelled; nothing ran"),
    ("accept", {"approve": True, "deny": "9"}, "names '9', not one of the entries"),
])
async def test_a_cancelled_or_unreadable_answer_runs_nothing(
        tmp_path: Path, action: str, content: Any, says: str):
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action=action, content=content)

    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving(*_serve(tmp_path, "--approve-plans"),
                                 elicitation_callback=elicit) as client:
            result = await client.call_tool("run_code", {"code": FIVE_MAILS})
    assert result.is_error and says in _text(result)
    assert _sent(tmp_path) == []


async def test_a_decline_denies_every_entry_and_the_program_sees_each_denial(tmp_path: Path):
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving(*_serve(tmp_path, "--approve-plans"),
                                 elicitation_callback=elicit) as client:
            result = structured(await client.call_tool("run_code", {"code": FIVE_MAILS}))
    assert _sent(tmp_path) == []
    assert all("denied when the plan was approved (plan approval " in v
               for v in result["result"]), result["result"]


async def test_a_client_that_cannot_elicit_gets_what_approvals_says(tmp_path: Path):
    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving(*_serve(tmp_path, "--approve-plans")) as client:
            result = structured(await client.call_tool("run_code", {"code": FIVE_MAILS}))
    assert _sent(tmp_path) == []
    assert all("the MCP client did not declare the elicitation capability" in v
               for v in result["result"]), result["result"]


async def test_a_plan_with_nothing_to_ask_runs_at_once_and_a_failing_dry_run_runs_nothing(
        tmp_path: Path):
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approve": True})

    failing = 'send_email(to="ann@example.com", subject="hi", body="x")\nraise ValueError("boom")'
    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving(*_serve(tmp_path, "--approve-plans"),
                                 elicitation_callback=elicit) as client:
            quiet = structured(await client.call_tool("run_code", {"code": "6 * 7"}))
            failed = await client.call_tool("run_code", {"code": failing})
    assert quiet["result"] == 42
    assert failed.is_error and "boom" in _text(failed)
    assert "nothing ran for real" in _text(failed)
    assert asked == [] and _sent(tmp_path) == []


async def test_a_plan_past_a_quota_is_refused_before_anyone_is_asked(tmp_path: Path):
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approve": True})

    args = _serve(tmp_path, "--approve-plans")
    with (tmp_path / "ask.toml").open("a") as policy:
        policy.write('\n[[quotas]]\ntool = "send_*"\nper_run = 3\n')
    async with asyncio.timeout(LIMIT_S):
        async with stdio_serving(*args, elicitation_callback=elicit) as client:
            refused = await client.call_tool("run_code", {"code": FIVE_MAILS})
    assert refused.is_error
    assert "the plan exceeds a quota, so it cannot be approved: entry 4" in _text(refused)
    assert asked == [] and _sent(tmp_path) == []
