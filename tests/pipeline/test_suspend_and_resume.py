"""Deferred approvals, a call's own approval channel, idempotency keys, and resuming
suspended calls (docs/pipeline-spec.md §4.2, §4.3)."""

from typing import Any

import pytest

from codemode.pipeline import (
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalRequest,
    Ask,
    LogInvariantError,
    PendingApproval,
    ResumeError,
    Session,
    Signal,
    ToolDefinition,
    events,
)
from codemode.pipeline.log import ViolationKind, check

from conftest import inp, make_tool


class OwnChannel:
    """A call's own approval channel answering a fixed outcome; remembers what it saw."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.seen: list[ApprovalRequest] = []

    async def request(self, request: ApprovalRequest) -> Any:
        self.seen.append(request)
        return self.answer


def asking(defer: bool = False) -> Any:
    return lambda execution, next: Ask("needs a person", defer=defer)


async def test_a_deferred_approval_fails_approval_pending_without_running() -> None:
    ran: list[Any] = []

    async def body(args: Any, ctx: Any) -> str:
        ran.append(args)
        return "ran"

    session = Session(tools=[make_tool("echo", body)])
    session.on("tools/pre-execute", asking(defer=True))
    channel = OwnChannel("deferred")
    result = await session.execute(inp(approval=channel))
    assert result.is_error and ran == []
    assert result.error is not None and result.error.info is not None
    assert result.error.info.code == "APPROVAL_PENDING"
    assert result.error.message == 'tool "echo" is waiting for approval: needs a person'
    assert [(r.tool_name, r.reason, r.defer, r.agent) for r in channel.seen] == [
        ("echo", "needs a person", True, "")]


async def test_an_answer_with_a_reason_names_it_in_the_denial() -> None:
    session = Session(tools=[make_tool()])
    session.on("tools/pre-execute", asking())
    result = await session.execute(inp(approval=OwnChannel(ApprovalAnswer("rejected",
                                                                          "too risky"))))
    assert result.denied
    assert result.error is not None
    assert result.error.message == 'the user rejected tool "echo": too risky'


async def test_a_call_without_an_agent_is_routed_to_its_own_channel() -> None:
    session = Session(tools=[make_tool()], approval="ask")
    session.on("tools/pre-execute", asking())
    assert not (await session.execute(inp(approval=OwnChannel("allowed-once")))).is_error
    denied = await session.execute(inp())          # the session's channel needs an agent
    assert denied.error is not None and "no agent to route it" in denied.error.message


async def test_the_body_sees_the_idempotency_key() -> None:
    seen: list[Any] = []

    async def body(args: Any, ctx: Any) -> str:
        seen.append((ctx.idempotency_key, ctx.resumption))
        return "ok"

    session = Session(tools=[make_tool("echo", body)])
    await session.execute(inp(idempotency_key="run:3"))
    await session.call("echo", {})
    assert seen == [("run:3", None), (None, None)]


async def test_has_approver() -> None:
    session = Session()
    assert not session.has_approver("a")
    session.mount_approval("ask")
    assert not session.has_approver("a")          # mounted, but nobody answers
    dispose = session.on("approval/answer", lambda request, next: "allowed-once", agent="a")
    assert session.has_approver("a") and not session.has_approver("b")
    dispose()
    session.mount_approval("never")
    assert session.has_approver("b")              # "never" decides without anyone


async def test_recorded_decisions_are_audited_like_answers() -> None:
    session = Session(approval="ask")
    service = session.approval
    request = ApprovalRequest(agent="a", tool_name="t", call_id="c", reason=None,
                              signal=Signal())
    async with session.turn():
        assert service.record(request, "allowed-once") == "allowed-once"
    logged = [e for e in session.log.read()
              if isinstance(e, (events.ApprovalAsked, events.ApprovalDecided))]
    assert [type(e).__name__ for e in logged] == ["ApprovalAsked", "ApprovalDecided"]
    assert logged[1].outcome == "allowed-once"


def resumable_tool(session: Session, seen: list[Any]) -> ToolDefinition:
    """`job`: suspends on its first call (logging `tool/suspended` itself, as a resumable
    tool does), finishes when resumed."""

    async def body(args: Any, ctx: Any) -> Any:
        seen.append((ctx.execution.call_id, ctx.resumption))
        if ctx.resumption is None:
            session.log.append(events.ToolSuspended(
                run_id=ctx.execution.call_id, call_id=ctx.execution.call_id, name="job",
                arguments=dict(args), state={"step": 1},
                requests=(PendingApproval(id="r:1", tool_name="job", arguments={}),)))
            return {"status": "pending"}
        return {"status": "done", "approved": [d.approved for d in ctx.resumption.decisions]}

    return make_tool("job", body, resumable=True)


@pytest.fixture
def suspending_session(tmp_path: Any) -> Any:
    seen: list[Any] = []
    session = Session(log=tmp_path / "s.jsonl")
    session.register(resumable_tool(session, seen))
    yield session, seen
    session.close()


async def test_resume_calls_the_tool_again_with_the_resumption(suspending_session: Any) -> None:
    session, seen = suspending_session
    first = await session.call("job", {"x": 1}, call_id="r")
    assert first.value == {"status": "pending"}
    done = await session.resume("r", {"r:1": False})
    assert done.value == {"status": "done", "approved": [False]}
    call_id, resumption = seen[-1]
    assert call_id == "r:resume:1"
    assert (resumption.run_id, resumption.state) == ("r", {"step": 1})
    with pytest.raises(ResumeError, match="already resumed"):
        await session.resume("r", {"r:1": True})
    logged = list(session.log.read())
    assert check(logged) == []
    calls = [e for e in logged if isinstance(e, events.ToolCall)]
    assert [(c.call_id, c.arguments) for c in calls] == [("r", '{"x":1}'),
                                                         ("r:resume:1", '{"x":1}')]
    [resumed] = [e for e in logged if isinstance(e, events.ToolResumed)]
    assert resumed.decisions == (ApprovalDecision(id="r:1", approved=False),)


async def test_the_log_refuses_a_second_resumption(suspending_session: Any) -> None:
    session, _ = suspending_session
    await session.call("job", {}, call_id="r")
    session.log.append(events.ToolResumed(run_id="r", call_id="x", decisions=()))
    with pytest.raises(LogInvariantError):
        session.log.append(events.ToolResumed(run_id="r", call_id="y", decisions=()))
    violations = check([events.ToolResumed(seq=1, run_id="q", call_id="x", decisions=())])
    assert [v.kind for v in violations] == [ViolationKind.RESUME_WITHOUT_SUSPEND]


async def test_only_a_resumable_tool_is_resumed(tmp_path: Any) -> None:
    session = Session(tools=[make_tool("plain")], log=tmp_path / "s.jsonl")
    session.log.append(events.ToolSuspended(
        run_id="r", call_id="r", name="plain", arguments={}, state=None,
        requests=(PendingApproval(id="r:1", tool_name="plain", arguments={}),)))
    with pytest.raises(ResumeError, match="not resumable"):
        await session.resume("r", {"r:1": True})


async def test_a_resumption_that_crashed_gives_the_suspension_back(tmp_path: Any) -> None:
    path = tmp_path / "s.jsonl"
    seen: list[Any] = []
    session = Session(log=path)
    session.register(resumable_tool(session, seen))
    await session.call("job", {}, call_id="r")
    # a resumption that dies mid-call: its tool/call is logged, its result never is
    session.log.append(events.ToolResumed(run_id="r", call_id="r:resume:1", decisions=()))
    session.begin_turn()
    session.log.append(events.StepStart(turn=2, step=9))
    session.log.append(events.ToolCall(turn=2, step=9, call_id="r:resume:1", name="job",
                                       arguments="{}"))
    session.log.close()                                   # the process is gone

    reopened = Session(log=path)                          # crash repair answers the call
    reopened.register(resumable_tool(reopened, seen))
    done = await reopened.resume("r", {"r:1": True})
    assert done.value == {"status": "done", "approved": [True]}
    assert seen[-1][0] == "r:resume:2"
    reopened.close()
    assert check(list(Session(log=path).log.read())) == []
