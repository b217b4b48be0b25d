"""`codemode log show`: a log's calls as a tree, from both backends, read-only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codemode import Policy, Session
from codemode.cli import app
from codemode.fixtures.toolset import builtin_tools

PROGRAM = '''
ids = list_orders(customer="ada@example.com")
try:
    sleep_ms(ms=1)
except ToolDenied:
    pass
len(ids)
'''

EXPECTED = '''\
run_code "orders" · ok · N ms
├── list_orders(customer="ada@example.com") · ok · N ms
└── sleep_ms(ms=1) · denied · N ms · approval: rejected · the user rejected tool "sleep_ms"
add(a=1, b=2) · ok · N ms
run_code(code="1 / 0") · error CODE_RUN_FAILED · N ms · code run failed (exception): division by zero
'''  # noqa: E501  (one tree line, as printed)


@pytest.fixture(params=["session.jsonl", "session.db"])
def log_path(request, tmp_path: Path) -> Path:
    return tmp_path / request.param


async def _record(path: Path, *, close: bool = True) -> Session:
    session = Session(tools=builtin_tools(), log=str(path), approval="ask", mode="both")
    Policy.from_data({"rules": [{"tool": "sleep_ms", "action": "ask",
                                 "reason": "naps need approval"}]}).apply(session)
    session.on("approval/answer", lambda request, next: "rejected")
    await session.call("run_code", {"code": PROGRAM, "description": "orders"}, agent="main")
    await session.call("add", {"a": 1, "b": 2}, agent="main")
    await session.call("run_code", {"code": "1 / 0"}, agent="main")
    if close:
        session.log.close()
    return session


def _show(*args: str):
    return CliRunner().invoke(app, ["log", "show", *args])


async def test_the_tree_shows_calls_sub_calls_codes_and_approvals(log_path: Path):
    await _record(log_path)
    shown = _show(str(log_path))
    assert shown.exit_code == 0, shown.output
    assert re.sub(r"\d+ ms", "N ms", shown.output) == EXPECTED


async def test_json_has_the_same_tree(log_path: Path):
    await _record(log_path)
    shown = _show(str(log_path), "--json")
    assert shown.exit_code == 0, shown.output
    calls = json.loads(shown.output)["calls"]
    assert [(c["name"], c["status"], c.get("code")) for c in calls] == [
        ("run_code", "ok", None), ("add", "ok", None), ("run_code", "error", "CODE_RUN_FAILED")]
    run = calls[0]
    assert [(s["callId"], s["name"], s["status"]) for s in run["subcalls"]] == [
        (f"{run['callId']}:code:1", "list_orders", "ok"),
        (f"{run['callId']}:code:2", "sleep_ms", "denied")]
    assert run["subcalls"][1]["code"] == "DENIED"
    assert run["subcalls"][1]["approvals"] == [{"reason": "naps need approval",
                                                "outcome": "rejected"}]
    assert all(c["durationMs"] >= 0 for c in calls)


async def test_a_log_still_being_written_is_shown_without_taking_it(log_path: Path):
    session = await _record(log_path, close=False)      # the writer keeps its lock
    try:
        shown = _show(str(log_path))
        assert shown.exit_code == 0, shown.output
        assert shown.output.startswith('run_code "orders" · ok · ')
        await session.call("add", {"a": 2, "b": 2})       # the writer is not disturbed
    finally:
        session.log.close()


def test_a_corrupt_log_exits_2_naming_the_line(tmp_path: Path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"type": "turn/start", "turn": 1, "seq": 1, "time": 0}\nnot json\n{}\n')
    shown = _show(str(path))
    assert shown.exit_code == 2
    assert "at line 2" in shown.output


def test_an_unknown_suffix_exits_2(tmp_path: Path):
    shown = _show(str(tmp_path / "log.txt"))
    assert shown.exit_code == 2
    assert "unknown session log type" in shown.output


async def test_a_discovery_call_shows_as_a_lookup_the_host_answered(log_path: Path):
    session = Session(tools=builtin_tools(), log=str(log_path))
    Policy().apply(session)
    await session.call("run_code", {"code": 'describe("add")\nadd(a=1, b=2)',
                                    "description": "look"})
    session.log.close()
    shown = _show(str(log_path))
    lines = re.sub(r"\d+ ms", "N ms", shown.output).splitlines()
    assert lines[1] == '├── codemode/describe(name="add") · ok · N ms · answered by the host'
    assert lines[2].startswith("└── add(a=1, b=2) · ok")
    run = json.loads(_show(str(log_path), "--json").output)["calls"][0]
    assert [s.get("lookup", False) for s in run["subcalls"]] == [True, False]


MAILS = '''
for name in ["ann", "bob"]:
    try:
        send_email(to=name + "@example.com", subject="hi", body="hello")
    except ToolDenied:
        pass
'''


@pytest.mark.slow
@pytest.mark.parametrize("service", ["ask", None], ids=["service", "no-service"])
async def test_a_call_a_plan_approval_decided_names_the_approval_and_entry(
        log_path: Path, service: str | None):
    from codemode import approve_plan, run_approved
    from codemode.fixtures.mailbox import mailbox_tools
    from codemode.pipeline import events
    from codemode.pipeline.log import load

    outbox: list = []
    session = Session(tools=mailbox_tools(outbox), log=str(log_path), approval=service)
    mode = Policy.from_data({"rules": [{"tool": "send_*", "action": "ask",
                                        "reason": "mail leaves"}]}).apply(session)
    approval = approve_plan(mode, await mode.plan(MAILS), deny={2: "not bob"})
    await run_approved(mode, approval, agent="main")
    session.log.close()
    assert [m["to"] for m in outbox] == ["ann@example.com"]
    decided = [e for e in load(str(log_path)) if isinstance(e, events.ApprovalDecided)]
    where = f"plan approval {approval.id}, entry"
    assert [(e.outcome, e.by) for e in decided] == [
        ("allowed-once", f"{where} 1"), ("rejected", f"{where} 2")]
    shown = _show(str(log_path))
    assert shown.exit_code == 0, shown.output
    assert f"· approval: allowed-once by {where} 1" in shown.output
    assert f"· approval: rejected by {where} 2" in shown.output
    calls = json.loads(_show(str(log_path), "--json").output)["calls"]
    assert [s["approvals"] for s in calls[-1]["subcalls"]] == [
        [{"reason": "mail leaves", "outcome": "allowed-once", "by": f"{where} 1"}],
        [{"reason": "mail leaves", "outcome": "rejected", "by": f"{where} 2"}]]
