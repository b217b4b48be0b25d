"""Hook bridges into tools/pre-execute (PIPELINE.md S4, §10)."""

import sys

from pipeline import HookOutput, Session, command_hook
from pipeline.events import HookInvoked, HookResult

from conftest import error_text, inp, make_tool


async def test_a_deny_hook_denies_and_logs_the_invocation_pair():
    session = Session(tools=[make_tool("rm"), make_tool("ls")])
    session.add_hook(lambda e: HookOutput(decision="deny", reason="rm is off limits"),
                     handler_id="guard-rm", matcher="rm|mv")
    async with session.turn():
        denied = await session.execute(inp("rm"))
        allowed = await session.execute(inp("ls"))
    assert denied.content == error_text("rm is off limits") and denied.error.info is None
    assert allowed.is_error is False
    events = session.log.read()
    [invoked] = [e for e in events if isinstance(e, HookInvoked)]
    [result] = [e for e in events if isinstance(e, HookResult)]
    assert (invoked.turn, invoked.point, invoked.dialect, invoked.matcher, invoked.handler_id) == (
        1, "tools/pre-execute", "python", "rm|mv", "guard-rm")
    assert (result.handler_id, result.decision) == ("guard-rm", "deny") and result.duration_ms >= 0


async def test_an_ask_hook_routes_to_approval_and_an_abstaining_hook_delegates():
    session = Session(tools=[make_tool("t")])
    session.add_hook(lambda e: {"decision": "ask", "reason": "hook wants a human"}, handler_id="h1")
    result = await session.execute(inp("t", agent="main"))
    assert result.error.message == "hook wants a human"
    session2 = Session(tools=[make_tool("t")])
    session2.add_hook(lambda e: None, handler_id="h2")
    assert (await session2.execute(inp("t"))).is_error is False
    assert [e.decision for e in session2.log.read() if isinstance(e, HookResult)] == ["delegate"]


async def test_a_raising_hook_fails_the_call_and_logs_an_error_result():
    def broken(execution):
        raise RuntimeError("hook crashed")

    session = Session(tools=[make_tool("t")])
    session.add_hook(broken, handler_id="h")
    result = await session.execute(inp("t"))
    assert result.content == error_text("hook crashed")
    assert [e.decision for e in session.log.read() if isinstance(e, HookResult)] == ["error"]


async def test_a_command_hook_exit_2_denies_with_stderr():
    script = "import sys, json; d = json.load(sys.stdin); sys.stderr.write('no ' + d['toolName']); sys.exit(2)"
    session = Session(tools=[make_tool("t")])
    session.add_hook(command_hook([sys.executable, "-c", script]), handler_id="cmd", dialect="command")
    result = await session.execute(inp("t"))
    assert result.error.message == "no t"
    [logged] = [e for e in session.log.read() if isinstance(e, HookResult)]
    assert (logged.exit_code, logged.stderr_summary) == (2, "no t")


async def test_a_command_hook_json_decision_and_other_exit_codes():
    ask = "import json; print(json.dumps({'decision': 'ask', 'reason': 'check'}))"
    fail = "import sys; sys.exit(1)"
    session = Session(tools=[make_tool("a"), make_tool("b")])
    session.add_hook(command_hook([sys.executable, "-c", ask]), handler_id="ask", matcher="a")
    session.add_hook(command_hook([sys.executable, "-c", fail]), handler_id="fail", matcher="b")
    assert (await session.execute(inp("a"))).error.message == "check"
    assert (await session.execute(inp("b"))).is_error is False


async def test_code_dispatch_log_listeners_replace_logged_content_and_raising_ones_are_contained():
    session = Session(tools=[make_tool("t", lambda a, c: "x" * 100)])
    result = await session.execute(inp("t", parent=object()))
    assert await session.code_dispatch_content(None, result) == result.content

    session.on("tools/code-dispatch-log", lambda e, r, content, next: [{"type": "text", "text": "[spilled]"}])
    assert await session.code_dispatch_content(None, result) == ({"type": "text", "text": "[spilled]"},)

    broken = Session()

    def boom(execution, result, content, next):
        raise RuntimeError("log listener broke")

    broken.on("tools/code-dispatch-log", boom)
    assert await broken.code_dispatch_content(None, result) == result.content
