"""`codemode.adapters.pydantic_ai`: a pydantic-ai agent driven by its offline
`FunctionModel` calls `run_code`, whose program calls real tools through the session."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai",
                    reason="pydantic-ai is not installed: pip install -e '.[pydantic-ai]'")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

from codemode import Policy, Session, events
from codemode.adapters.pydantic_ai import CodeModeToolset
from codemode.fixtures.toolset import builtin_tools
from codemode.pipeline.log import MemoryLog
from tests.codemode.adapters.adapter_helpers import FAILING_PROGRAM, ORDERS_PROGRAM, ORDERS_TEXT

EXAMPLE_POLICY = Path(__file__).resolve().parents[3] / "fixtures" / "policies" / "example.toml"


class Scripted:
    """A model that calls `run_code` with one program, then reports what came back."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.offered: list[list[tuple[str, str | None]]] = []

    def __call__(self, messages: list, info: AgentInfo) -> ModelResponse:
        self.offered.append([(t.name, t.description) for t in info.function_tools])
        last = messages[-1]
        answers = [p for p in last.parts if p.part_kind in ("tool-return", "retry-prompt")] \
            if isinstance(last, ModelRequest) else []
        if answers:
            return ModelResponse(parts=[TextPart(f"done: {answers[-1].content}")])
        return ModelResponse(parts=[ToolCallPart("run_code", {"code": self.code},
                                                 tool_call_id="call_1")])


async def test_an_agent_calls_run_code_which_calls_real_tools():
    session = Session(tools=builtin_tools())
    model = Scripted(ORDERS_PROGRAM)
    agent = Agent(FunctionModel(model), toolsets=[CodeModeToolset(session)])
    result = await agent.run("How much did Ada spend?")
    assert result.output == f"done: {ORDERS_TEXT}"
    [(name, description)] = model.offered[0]
    assert name == "run_code"
    assert "def get_order(order_id: str) -> dict[str, Any]" in description
    subcalls = [e.name for e in session.log.read() if isinstance(e, events.CodeDispatch)]
    assert subcalls == ["list_orders", "get_order", "get_order", "get_order"]


async def test_a_failing_program_is_a_tool_failure_the_model_sees():
    session = Session(tools=builtin_tools())
    agent = Agent(FunctionModel(Scripted(FAILING_PROGRAM)), toolsets=[CodeModeToolset(session)])
    result = await agent.run("Look up order nope")
    assert result.output.startswith("done: Error: code run failed (exception): ")
    parts = [p for m in result.all_messages() if isinstance(m, ModelRequest) for p in m.parts
             if isinstance(p, ToolReturnPart)]
    assert [p.tool_name for p in parts] == ["run_code"]


async def test_an_ask_rule_pauses_the_run_and_an_approval_resumes_it():
    session = Session(tools=builtin_tools(), log=MemoryLog())   # resumed in this process
    toolset = CodeModeToolset(session, policy=Policy.load(EXAMPLE_POLICY))
    code = "print('before', add(a=1, b=2))\nwaited = sleep_ms(ms=5)\nwaited"
    agent = Agent(FunctionModel(Scripted(code)), toolsets=[toolset],
                  output_type=[str, DeferredToolRequests])

    first = await agent.run("Take a short nap")
    assert isinstance(first.output, DeferredToolRequests)
    [call] = first.output.approvals
    assert (call.tool_name, call.args) == ("run_code", {"code": code})
    metadata = first.output.metadata[call.tool_call_id]
    run_id = metadata["run_id"]
    assert metadata["approvals"] == [
        {"id": f"{run_id}:2", "toolName": "sleep_ms", "arguments": {"ms": 5},
         "reason": "sleeping on the host needs approval",
         "shown": 'sleep_ms({"ms": 5}) (sleeping on the host needs approval)'}]
    assert toolset.paused_run(call.tool_call_id) == run_id

    approved = await agent.run(message_history=first.all_messages(),
                               deferred_tool_results=DeferredToolResults(
                                   approvals={call.tool_call_id: True}))
    assert approved.output == "done: before 3.0\n5\n[2 tool calls]"
    assert toolset.paused_run(call.tool_call_id) is None

    logged = session.log.read()
    # add ran once, before the pause; the resumed run answered it from the log
    assert [e.name for e in logged if isinstance(e, events.CodeDispatchStart)] == [
        "add", "sleep_ms", "sleep_ms"]
    assert [e.name for e in logged if isinstance(e, events.CodeReplayed)] == ["add"]
    assert [e.run_id for e in logged if isinstance(e, events.ToolResumed)] == [run_id]
    decided = [e.outcome for e in logged if isinstance(e, events.ApprovalDecided)]
    assert decided == []         # no approval channel: the decision came with the resumption


async def test_a_request_denied_in_the_metadata_raises_tool_denied_in_the_program(
        tmp_path: Path):
    log = tmp_path / "agent.jsonl"
    code = ("try:\n    sleep_ms(ms=5)\nexcept ToolDenied as exc:\n    print(exc.message)\n"
            "add(a=2, b=2)")
    session = Session(tools=builtin_tools(), log=log)
    toolset = CodeModeToolset(session, policy=Policy.load(EXAMPLE_POLICY))
    agent = Agent(FunctionModel(Scripted(code)), toolsets=[toolset],
                  output_type=[str, DeferredToolRequests])
    first = await agent.run("Nap, maybe")
    [call] = first.output.approvals
    metadata = first.output.metadata[call.tool_call_id]
    [request] = metadata["approvals"]
    await session.aclose()

    # another toolset on a new session over the same log: the metadata carries the run id
    session = Session(tools=builtin_tools(), log=log)
    toolset = CodeModeToolset(session, policy=Policy.load(EXAMPLE_POLICY))
    agent = Agent(FunctionModel(Scripted(code)), toolsets=[toolset],
                  output_type=[str, DeferredToolRequests])
    resumed = await agent.run(message_history=first.all_messages(),
                              deferred_tool_results=DeferredToolResults(
                                  approvals={call.tool_call_id: True},
                                  metadata={call.tool_call_id: {
                                      **metadata, "deny": {request["id"]: "not now"}}}))
    await session.aclose()
    assert resumed.output == ('done: the user rejected tool "sleep_ms": not now\n4.0\n'
                              "[2 tool calls, 1 failed (1 denied)]")


async def test_a_denied_run_code_runs_nothing_more_and_stays_paused():
    session = Session(tools=builtin_tools(), log=MemoryLog())   # resumed in this process
    toolset = CodeModeToolset(session, policy=Policy.load(EXAMPLE_POLICY))
    code = "add(a=1, b=2)\nsleep_ms(ms=5)\nadd(a=3, b=4)"
    agent = Agent(FunctionModel(Scripted(code)), toolsets=[toolset],
                  output_type=[str, DeferredToolRequests])
    first = await agent.run("Nap")
    [call] = first.output.approvals
    denied = await agent.run(message_history=first.all_messages(),
                             deferred_tool_results=DeferredToolResults(
                                 approvals={call.tool_call_id: False}))
    assert denied.output == "done: The tool call was denied."
    logged = session.log.read()
    assert [e.name for e in logged if isinstance(e, events.CodeDispatchStart)] == [
        "add", "sleep_ms"]
    assert [e for e in logged if isinstance(e, events.ToolResumed)] == []
    # the run can still be settled by the application
    run_id = first.output.metadata[call.tool_call_id]["run_id"]
    done = await session.resume(run_id, {f"{run_id}:2": False})
    assert done.is_error and "ToolDenied" in done.text


FIVE_MAILS = '''
for name in ["ann", "bob", "cy", "dee", "eve"]:
    try:
        send_email(to=name + "@example.com", subject="hi", body="hello")
    except ToolDenied as exc:
        print(exc.message)
print("done")
'''

MAIL_POLICY = {"rules": [{"tool": "send_*", "action": "ask",
                          "reason": "mail leaves the \u202ehouse"}]}


def _plan_toolset(outbox: list) -> tuple[Session, CodeModeToolset]:
    from codemode.fixtures.mailbox import mailbox_tools

    session = Session(tools=mailbox_tools(outbox), log=MemoryLog())
    return session, CodeModeToolset(session, policy=Policy.from_data(MAIL_POLICY),
                                    approve_plans=True)


@pytest.mark.slow
@pytest.mark.parametrize(("deny", "sent"), [
    (None, ["ann", "bob", "cy", "dee", "eve"]),
    ({"2": "bob is away", 4: None}, ["ann", "cy", "eve"]),
])
async def test_a_plan_is_approved_once_and_each_mail_is_sent_once(deny, sent):
    outbox: list = []
    session, toolset = _plan_toolset(outbox)
    agent = Agent(FunctionModel(Scripted(FIVE_MAILS)), toolsets=[toolset],
                  output_type=[str, DeferredToolRequests])
    first = await agent.run("Mail everyone")
    assert isinstance(first.output, DeferredToolRequests)
    [call] = first.output.approvals                      # one request for five calls
    assert outbox == []                                  # the dry run sent nothing
    plan = first.output.metadata[call.tool_call_id]["plan"]
    assert [e["n"] for e in plan["entries"]] == [1, 2, 3, 4, 5]
    assert plan["entries"][0]["shown"] == (
        'send_email({"to": "ann@example.com", "subject": "hi", "body": "hello"}) '
        "(mail leaves the \\u202ehouse)")
    results = DeferredToolResults(approvals={call.tool_call_id: True},
                                  metadata={call.tool_call_id: {"deny": deny}} if deny else {})
    done = await agent.run(message_history=first.all_messages(),
                           deferred_tool_results=results)
    assert [m["to"] for m in outbox] == [f"{n}@example.com" for n in sent]
    assert isinstance(done.output, str) and "done" in done.output
    assert ("bob is away (plan approval " in done.output) == bool(deny)
    logged = session.log.read()
    assert not any(isinstance(e, events.ToolSuspended) for e in logged)   # no pause
    # the same approval given again: it was used; the program asks anew, nothing is sent
    again = await agent.run(message_history=first.all_messages(),
                            deferred_tool_results=results)
    assert isinstance(again.output, DeferredToolRequests), again.output
    assert [m["to"] for m in outbox] == [f"{n}@example.com" for n in sent]
    await session.aclose()


@pytest.mark.slow
async def test_a_denied_plan_or_a_forged_one_sends_nothing():
    outbox: list = []
    session, toolset = _plan_toolset(outbox)
    agent = Agent(FunctionModel(Scripted(FIVE_MAILS)), toolsets=[toolset],
                  output_type=[str, DeferredToolRequests])
    first = await agent.run("Mail everyone")
    [call] = first.output.approvals
    denied = await agent.run(message_history=first.all_messages(),
                             deferred_tool_results=DeferredToolResults(
                                 approvals={call.tool_call_id: ToolDenied("not today")}))
    assert denied.output == "done: not today"
    # approved, but with another program in its arguments: refused, nothing runs
    second = await agent.run("Mail everyone")
    [call] = second.output.approvals
    forged = await agent.run(message_history=second.all_messages(),
                             deferred_tool_results=DeferredToolResults(approvals={
                                 call.tool_call_id: ToolApproved(override_args={
                                     "code": FIVE_MAILS.replace("bob", "mallory")})}))
    assert "an approved plan runs its own program" in forged.output
    assert outbox == []
    await session.aclose()


@pytest.mark.slow
async def test_a_plan_with_nothing_to_ask_runs_at_once_and_a_failing_dry_run_runs_nothing():
    outbox: list = []
    session, toolset = _plan_toolset(outbox)
    quiet = Agent(FunctionModel(Scripted("print(6 * 7)")), toolsets=[toolset],
                  output_type=[str, DeferredToolRequests])
    assert (await quiet.run("Multiply")).output.startswith("done: 42")
    failing = ('send_email(to="ann@example.com", subject="hi", body="x")\n'
               'raise ValueError("boom")')
    agent = Agent(FunctionModel(Scripted(failing)), toolsets=[toolset],
                  output_type=[str, DeferredToolRequests])
    failed = await agent.run("Mail and fail")
    assert "boom" in failed.output and "nothing ran for real" in failed.output
    assert outbox == []
    await session.aclose()


class ScriptedAs(Scripted):
    """`Scripted`, with its own tool call id."""

    def __init__(self, code: str, tool_call_id: str) -> None:
        super().__init__(code)
        self.tool_call_id = tool_call_id

    def __call__(self, messages: list, info: AgentInfo) -> ModelResponse:
        response = super().__call__(messages, info)
        for part in response.parts:
            if isinstance(part, ToolCallPart):
                part.tool_call_id = self.tool_call_id
        return response


@pytest.mark.slow
async def test_a_forgotten_plan_is_not_approved_its_program_asks_as_without_the_option(
        monkeypatch):
    from codemode.adapters import pydantic_ai

    monkeypatch.setattr(pydantic_ai, "KEPT_PLANS", 1)
    outbox: list = []
    session, toolset = _plan_toolset(outbox)
    runs = []
    for tool_call_id in ("first", "second"):
        agent = Agent(FunctionModel(ScriptedAs(FIVE_MAILS, tool_call_id)), toolsets=[toolset],
                      output_type=[str, DeferredToolRequests])
        runs.append((agent, await agent.run("Mail everyone")))
    agent, first = runs[0]
    [call] = first.output.approvals
    again = await agent.run(message_history=first.all_messages(),
                            deferred_tool_results=DeferredToolResults(
                                approvals={call.tool_call_id: True}))
    assert isinstance(again.output, DeferredToolRequests)      # the run paused on ann's mail
    [paused] = again.output.approvals
    assert [a["arguments"]["to"] for a in again.output.metadata[paused.tool_call_id][
        "approvals"]] == ["ann@example.com"]
    assert outbox == []
    await session.aclose()


@pytest.mark.slow
async def test_a_plan_past_a_quota_is_refused_up_front_and_sends_nothing():
    from codemode.fixtures.mailbox import mailbox_tools

    outbox: list = []
    session = Session(tools=mailbox_tools(outbox), log=MemoryLog())
    policy = Policy.from_data({**MAIL_POLICY, "quotas": [{"tool": "send_*", "per_run": 3}]})
    toolset = CodeModeToolset(session, policy=policy, approve_plans=True)
    agent = Agent(FunctionModel(Scripted(FIVE_MAILS)), toolsets=[toolset],
                  output_type=[str, DeferredToolRequests])
    refused = await agent.run("Mail everyone")
    assert isinstance(refused.output, str)                 # nobody is asked to approve it
    assert "the plan exceeds a quota, so it cannot be approved: entry 4" in refused.output
    assert outbox == []
    await session.aclose()
