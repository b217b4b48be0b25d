"""Python hooks: callables as pre-/post-execute listeners (docs/pipeline-spec.md S4, S11, §10)."""

import asyncio
import logging

import pytest

from codemode.pipeline import Session
from codemode.pipeline.events import HookInvoked, HookResult
from codemode.pipeline.hooks import PYTHON_DIALECT, Answer, python_hook

from conftest import error_text, inp, make_tool


def decisions(session):
    return [e.decision for e in session.log.read() if isinstance(e, HookResult)]


async def test_a_deny_hook_denies_and_logs_the_invocation_pair():
    session = Session(tools=[make_tool("rm"), make_tool("ls")])
    python_hook(
        session,
        "tools/pre-execute",
        lambda e: Answer(decision="deny", reason="rm is off limits"),
        handler_id="guard-rm",
        matcher="rm|mv",
    )
    async with session.turn():
        denied = await session.execute(inp("rm"))
        allowed = await session.execute(inp("ls"))
    assert denied.content == error_text("rm is off limits") and denied.error.info is None
    assert allowed.is_error is False
    events = session.log.read()
    [invoked] = [e for e in events if isinstance(e, HookInvoked)]
    [result] = [e for e in events if isinstance(e, HookResult)]
    assert (invoked.turn, invoked.point, invoked.dialect, invoked.matcher, invoked.handler_id) == (
        1, "tools/pre-execute", PYTHON_DIALECT, "rm|mv", "guard-rm")
    assert PYTHON_DIALECT == "python"
    assert (result.handler_id, result.decision) == ("guard-rm", "deny") and result.duration_ms >= 0


async def test_an_ask_hook_routes_to_approval_and_an_abstaining_hook_delegates():
    session = Session(tools=[make_tool("t")])
    python_hook(
        session,
        "tools/pre-execute",
        lambda e: {"decision": "ask", "reason": "hook wants a human"},
        handler_id="h1",
    )
    result = await session.execute(inp("t", agent="main"))
    assert result.error.message == "hook wants a human"
    session2 = Session(tools=[make_tool("t")])
    python_hook(session2, "tools/pre-execute", lambda e: None, handler_id="h2")
    assert (await session2.execute(inp("t"))).is_error is False
    assert decisions(session2) == ["delegate"]


async def test_a_dict_answer_maps_like_a_command_hook_s_json():
    async def deny_without_reason(execution):
        await asyncio.sleep(0)
        return {"hookSpecificOutput": {"permissionDecision": "block"}}

    session = Session(tools=[make_tool("t")])
    python_hook(session, "tools/pre-execute", deny_without_reason, handler_id="h")
    result = await session.execute(inp("t"))
    assert result.content == error_text('denied by hook "h"')
    assert decisions(session) == ["deny"]


async def test_an_unknown_answer_is_a_non_blocking_error(caplog):
    session = Session(tools=[make_tool("t")])
    python_hook(session, "tools/pre-execute", lambda e: {"decision": "maybe"}, handler_id="odd")
    python_hook(session, "tools/pre-execute", lambda e: 42, handler_id="num")
    with caplog.at_level(logging.WARNING, logger="codemode.pipeline.hooks"):
        assert (await session.execute(inp("t"))).is_error is False
    assert decisions(session) == ["error", "error"]
    assert "hook \"odd\" returned an unknown decision 'maybe'" in caplog.text
    assert 'hook "num" returned int' in caplog.text


async def test_a_raising_hook_fails_the_call_and_logs_an_error_result():
    def broken(execution):
        raise RuntimeError("hook crashed")

    session = Session(tools=[make_tool("t")])
    python_hook(session, "tools/pre-execute", broken, handler_id="h")
    result = await session.execute(inp("t"))
    assert result.content == error_text('hook "h" failed: RuntimeError: hook crashed')
    assert result.error.code == "HOOK_FAILED"
    assert decisions(session) == ["error"]


async def test_a_post_hook_sees_the_result_and_can_block_or_add_context():
    seen = []

    def post(execution, result):
        seen.append((execution.name, result.is_error))
        if execution.name == "bad":
            return {"decision": "block", "reason": "not this one"}
        return {"additionalContext": "checked"}

    session = Session(tools=[make_tool("ok"), make_tool("bad")])
    python_hook(session, "tools/post-execute", post, handler_id="p")
    ok = await session.execute(inp("ok"))
    bad = await session.execute(inp("bad", call_id="c2"))
    assert ok.is_error is False and ok.additional_contexts == ("checked",)
    assert bad.is_error is True and bad.content == ({"type": "text", "text": "not this one"},)
    assert seen == [("ok", False), ("bad", False)]
    assert decisions(session) == ["accept", "block"]


async def test_the_disposer_removes_the_hook_and_the_default_id_is_the_qualname():
    def guard(execution):
        return {"decision": "deny"}

    session = Session(tools=[make_tool("t")])
    dispose = python_hook(session, "tools/pre-execute", guard)
    assert (await session.execute(inp("t"))).content == error_text(
        f'denied by hook "{guard.__qualname__}"'
    )
    dispose()
    assert (await session.execute(inp("t", call_id="c2"))).is_error is False


def test_bad_registrations_raise_at_once():
    session = Session()
    with pytest.raises(ValueError, match="python hooks attach to"):
        python_hook(session, "tools/result", lambda e: None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a valid regular expression"):
        python_hook(session, "tools/pre-execute", lambda e: None, matcher="(")
    with pytest.raises(TypeError):
        python_hook(session, "tools/pre-execute", "not callable")  # type: ignore[arg-type]
