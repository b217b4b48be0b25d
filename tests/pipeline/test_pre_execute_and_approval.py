"""tools/pre-execute decisions and the approval channel (docs/pipeline-spec.md S4, S5, §4)."""

import asyncio

import msgspec
import pytest

from codemode.pipeline import (
    Allow,
    ApprovalAnswer,
    ApprovalRequest,
    ApprovalService,
    Ask,
    Deny,
    Session,
    Signal,
)
from codemode.pipeline.events import ApprovalAsked, ApprovalDecided, ApprovalPolicyChanged

from conftest import Published, error_text, inp, make_tool


def counting_tool(name: str = "echo"):
    calls = []

    async def body(args, ctx):
        calls.append(dict(args))
        return "ran"

    return make_tool(name, body), calls


async def test_pre_execute_deny_fails_without_code_and_skips_the_body():
    defn, calls = counting_tool()
    session = Session(tools=[defn])
    session.on("tools/pre-execute", lambda execution, next: Deny("not today"))
    result = await session.execute(inp())
    assert result.is_error and result.denied
    assert result.content == error_text("not today")
    assert (result.error.message, result.error.info) == ("not today", None)
    assert calls == []


async def test_listeners_delegate_with_next_and_the_default_is_allow():
    defn, calls = counting_tool()
    session = Session(tools=[defn])
    order = []

    async def first(execution, next):
        order.append("first")
        return await next()

    def second(execution, next):
        order.append("second")
        return next()

    session.on("tools/pre-execute", first)
    session.on("tools/pre-execute", second)
    result = await session.execute(inp())
    assert (result.is_error, order, len(calls)) == (False, ["first", "second"], 1)


async def test_an_outer_listener_overrides_an_inner_decision():
    defn, calls = counting_tool()
    session = Session(tools=[defn])

    async def outer(execution, next):
        inner = await next()
        assert inner == Deny("inner says no")
        return Allow()

    session.on("tools/pre-execute", outer)
    session.on("tools/pre-execute", lambda e, n: Deny("inner says no"))
    assert (await session.execute(inp())).is_error is False
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("needs a human", "needs a human"),
        (None, 'tool "echo" requires approval (not yet supported)'),
    ],
)
async def test_ask_without_an_approval_channel_denies(reason, message):
    defn, calls = counting_tool()
    session = Session(tools=[defn])
    session.on("tools/pre-execute", lambda e, n: Ask(reason))
    result = await session.execute(inp(agent="main"))
    assert result.content == error_text(message)
    assert result.error.info is None and calls == []


async def test_ask_without_an_agent_denies_without_asking():
    defn, calls = counting_tool()
    session = Session(tools=[defn], approval="ask")
    asked = []
    session.on("approval/answer", lambda request, next: asked.append(request) or "allowed-once")
    session.on("tools/pre-execute", lambda e, n: Ask("why"))
    async with session.turn():
        result = await session.execute(inp())
    assert (
        result.error.message
        == 'tool "echo" requires approval, but the call has no agent to route it'
    )
    assert asked == []
    assert calls == []
    assert not any(isinstance(e, ApprovalAsked) for e in session.log.read())


async def test_allowed_once_runs_the_tool_and_forwards_the_ask_fields_without_arguments():
    defn, calls = counting_tool()
    session = Session(tools=[defn], approval="ask")
    requests = []

    def answer(request, next):
        requests.append(request)
        return "allowed-once"

    session.on("approval/answer", answer)
    session.on("tools/pre-execute", lambda e, n: Ask("deletes files"))
    async with session.turn():
        result = await session.execute(
            inp(arguments={"secret": "s3cr3t"}, agent="main", call_id="c9")
        )
    assert result.is_error is False and calls == [{"secret": "s3cr3t"}]
    [request] = requests
    assert (request.agent, request.tool_name, request.call_id, request.reason) == (
        "main",
        "echo",
        "c9",
        "deletes files",
    )
    assert not hasattr(request, "arguments")
    events = session.log.read()
    asked = [e for e in events if isinstance(e, ApprovalAsked)]
    decided = [e for e in events if isinstance(e, ApprovalDecided)]
    assert [(e.tool_name, e.call_id, e.reason) for e in asked] == [("echo", "c9", "deletes files")]
    assert [(e.id, e.outcome) for e in decided] == [(asked[0].id, "allowed-once")]
    assert "s3cr3t" not in repr(asked + decided)


async def test_an_answer_given_by_a_standing_decision_is_logged_with_what_gave_it():
    defn, calls = counting_tool()
    session = Session(tools=[defn], approval="ask")
    session.on("approval/answer",
               lambda request, next: ApprovalAnswer("allowed-once", by="standing order 7"))
    session.on("tools/pre-execute", lambda e, n: Ask("deletes files"))
    async with session.turn():
        await session.execute(inp(agent="main", call_id="c1"))
        await session.execute(inp(agent="main", call_id="c2"))   # by the service itself
    assert isinstance(session.approval, ApprovalService)
    request = ApprovalRequest(agent="main", tool_name="echo", call_id="c3", reason=None,
                              signal=Signal())
    async with session.turn():
        assert session.approval.record(request, "rejected", by="plan 3") == "rejected"
        session.approval.policy = "never"
        assert session.approval.record(request, "allowed-once", by="plan 3") == "rejected"
    decided = [e for e in session.log.read() if isinstance(e, ApprovalDecided)]
    assert [(e.outcome, e.by) for e in decided] == [
        ("allowed-once", "standing order 7"), ("allowed-once", "standing order 7"),
        ("rejected", "plan 3"), ("rejected", msgspec.UNSET)]   # "never" decided, not plan 3
    assert len(calls) == 2


@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        ("rejected", 'the user rejected tool "echo"'),
        ("cancelled", 'approval for tool "echo" was cancelled'),
        ("unavailable", 'tool "echo" requires approval, but no approval channel is available'),
        ("maybe", 'tool "echo" requires approval, but no approval channel is available'),
    ],
)
async def test_non_grant_outcomes_deny_with_distinct_reasons(outcome, message):
    defn, calls = counting_tool()
    session = Session(tools=[defn], approval="ask")
    session.on("approval/answer", lambda request, next: outcome)
    session.on("tools/pre-execute", lambda e, n: Ask("x"))
    post_seen = []
    session.on("tools/post-execute", lambda e, r, n: post_seen.append(r) or n())
    async with session.turn():
        result = await session.execute(inp(agent="main"))
    assert result.content == error_text(message)
    assert result.error.info is None and result.denied and calls == []
    assert post_seen == [result]


async def test_mounted_seam_without_an_answerer_is_unavailable():
    defn, _ = counting_tool()
    session = Session(tools=[defn], approval="ask")
    session.on("tools/pre-execute", lambda e, n: Ask())
    async with session.turn():
        result = await session.execute(inp(agent="main"))
    assert (
        result.error.message
        == 'tool "echo" requires approval, but no approval channel is available'
    )


async def test_a_raising_answerer_is_unavailable():
    defn, _ = counting_tool()
    session = Session(tools=[defn], approval="ask")
    session.on("approval/answer", lambda request, next: 1 / 0)
    session.on("tools/pre-execute", lambda e, n: Ask())
    async with session.turn():
        result = await session.execute(inp(agent="main"))
    assert (
        result.error.message
        == 'tool "echo" requires approval, but no approval channel is available'
    )


async def test_policy_never_rejects_without_consulting_anyone():
    defn, _ = counting_tool()
    session = Session(tools=[defn], approval="never")
    asked = []
    session.on("approval/answer", lambda request, next: asked.append(1) or "allowed-once")
    session.on("tools/pre-execute", lambda e, n: Ask())
    async with session.turn():
        result = await session.execute(inp(agent="main"))
    assert result.error.message == 'the user rejected tool "echo"' and asked == []
    assert [e.policy for e in session.log.read() if isinstance(e, ApprovalPolicyChanged)] == [
        "never"
    ]


async def test_approval_outside_an_open_turn_fails_the_call_on_the_final_route():
    defn, calls = counting_tool()
    session = Session(tools=[defn], approval="ask")
    session.on("tools/pre-execute", lambda e, n: Ask())
    post_seen = []
    session.on("tools/post-execute", lambda e, r, n: post_seen.append(r) or n())
    result = await session.execute(inp(agent="main"))
    assert result.error.message == 'approval for tool "echo" was requested outside an open turn'
    assert result.error.code == "APPROVAL_FAILED"
    assert post_seen == [] and calls == []


async def test_a_rogue_approval_stand_in_fails_the_call():
    class Rogue:
        async def request(self, request):
            return "always"

    defn, calls = counting_tool()
    session = Session(tools=[defn], approval=Rogue())
    session.on("tools/pre-execute", lambda e, n: Ask())
    result = await session.execute(inp(agent="main"))
    assert result.is_error and calls == []
    assert result.error.message == "approval returned an unexpected outcome: always"


async def test_caller_cancellation_overtaking_approval_is_aborted_before_dispatch():
    defn, calls = counting_tool()
    session = Session(tools=[defn], approval="ask")
    signal = Signal()
    answering = asyncio.Event()

    async def slow(request, next):
        answering.set()
        await asyncio.sleep(10)
        return "allowed-once"

    session.on("approval/answer", slow)
    session.on("tools/pre-execute", lambda e, n: Ask())
    async with session.turn():
        task = asyncio.ensure_future(session.execute(inp(agent="main", signal=signal)))
        await answering.wait()
        signal.abort()
        result = await asyncio.wait_for(task, 5)          # not the 10 s answer
    assert result.error.code == "ABORTED_BEFORE_DISPATCH"
    assert result.error.message == "tool call aborted before dispatch"
    assert calls == []
    assert [e.outcome for e in session.log.read() if isinstance(e, ApprovalDecided)] == [
        "cancelled"
    ]


async def test_allowed_once_then_a_guard_still_denies_and_the_audit_pair_is_logged():
    defn, calls = counting_tool()
    session = Session(tools=[defn], approval="ask")
    session.on("approval/answer", lambda request, next: "allowed-once")
    session.on("tools/pre-execute", lambda e, n: Ask())
    session.guard(lambda execution: "owner policy forbids echo")
    async with session.turn():
        result = await session.execute(inp(agent="main"))
    assert result.content == error_text("owner policy forbids echo")
    assert calls == []
    kinds = [type(e).__name__ for e in session.log.read()]
    assert kinds.count("ApprovalAsked") == 1 and kinds.count("ApprovalDecided") == 1


async def test_a_throwing_pre_execute_listener_keeps_its_typed_code_and_skips_post_execute():
    from codemode.pipeline import HarnessError

    class PolicyBroken(HarnessError):
        code = "POLICY_BROKEN"

    defn, calls = counting_tool()
    session = Session(tools=[defn])
    published = Published(session)
    post_seen = []
    session.on("tools/post-execute", lambda e, r, n: post_seen.append(r) or n())

    def listener(execution, next):
        raise PolicyBroken("policy store offline")

    session.on("tools/pre-execute", listener)
    result = await session.execute(inp())
    assert result.content == error_text("policy store offline")
    assert (result.error.info.name, result.error.info.code) == ("PolicyBroken", "POLICY_BROKEN")
    assert post_seen == [] and calls == [] and published.results == [result]


async def test_an_agent_scoped_listener_only_sees_that_agents_calls():
    defn, _ = counting_tool()
    session = Session(tools=[defn])
    seen = []
    session.on("tools/pre-execute", lambda e, n: seen.append(e.agent) or n(), agent="a")
    await session.execute(inp(agent="a"))
    await session.execute(inp(agent="b"))
    await session.execute(inp())
    assert seen == ["a"]


async def test_listeners_cannot_rewrite_arguments_or_identity():
    defn, calls = counting_tool()
    session = Session(tools=[defn])
    errors = []

    def meddle(execution, next):
        for attempt in (
            lambda: execution.arguments.__setitem__("x", 2),
            lambda: setattr(execution, "name", "other"),
            lambda: setattr(execution, "call_id", "c2"),
        ):
            try:
                attempt()
            except (TypeError, AttributeError) as exc:
                errors.append(type(exc).__name__)
        return next()

    session.on("tools/pre-execute", meddle)
    await session.execute(inp(arguments={"x": 1}))
    assert calls == [{"x": 1}] and len(errors) == 3
