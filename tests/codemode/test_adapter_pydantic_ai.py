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
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

from codemode import Policy, Session, events
from codemode.adapters.pydantic_ai import CodeModeToolset
from codemode.fixtures.toolset import builtin_tools
from tests.codemode.adapter_helpers import FAILING_PROGRAM, ORDERS_PROGRAM, ORDERS_TEXT

EXAMPLE_POLICY = Path(__file__).resolve().parents[2] / "fixtures" / "policies" / "example.toml"


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


async def test_an_ask_rule_becomes_a_deferred_approval_of_the_program():
    session = Session(tools=builtin_tools())
    toolset = CodeModeToolset(session, policy=Policy.load(EXAMPLE_POLICY))
    agent = Agent(FunctionModel(Scripted("waited = sleep_ms(ms=5)\nwaited")),
                  toolsets=[toolset], output_type=[str, DeferredToolRequests])

    first = await agent.run("Take a short nap")
    assert isinstance(first.output, DeferredToolRequests)
    [call] = first.output.approvals
    assert (call.tool_name, call.args) == ("run_code", {"code": "waited = sleep_ms(ms=5)\nwaited"})
    assert first.output.metadata[call.tool_call_id] == {"calls": [
        {"tool": "sleep_ms", "arguments": {"ms": 5},
         "reason": "sleeping on the host needs approval"}]}

    approved = await agent.run(message_history=first.all_messages(),
                               deferred_tool_results=DeferredToolResults(
                                   approvals={call.tool_call_id: True}))
    assert approved.output == "done: 5\n[1 tool call]"

    denied = await agent.run(message_history=first.all_messages(),
                             deferred_tool_results=DeferredToolResults(
                                 approvals={call.tool_call_id: False}))
    assert denied.output == "done: The tool call was denied."
    decided = [e.outcome for e in session.log.read() if isinstance(e, events.ApprovalDecided)]
    assert decided == ["cancelled", "allowed-once"]
