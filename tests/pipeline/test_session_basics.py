"""The core call path: success, failures as results, events in the log."""

import msgspec
import pytest

from codemode.pipeline import CallResult, DuplicateToolError, ReservedToolError, Session, tool
from codemode.pipeline.events import StepEnd, StepStart, ToolCall, ToolResult, TurnEnd, TurnStart


@tool
def add(a: int, b: int = 1) -> int:
    """Add two integers.

    Args:
        a: first addend
        b: second addend
    """
    return a + b


@tool
async def fails(reason: str) -> str:
    raise RuntimeError(reason)


async def test_a_successful_call_returns_value_and_rendered_content():
    session = Session(tools=[add])
    result = await session.call("add", {"a": 2, "b": 3})
    assert result == CallResult(is_error=False, value=5, content=({"type": "text", "text": "5"},))


async def test_a_throwing_tool_becomes_an_error_result():
    session = Session(tools=[fails])
    result = await session.call("fails", {"reason": "disk on fire"})
    assert result.is_error is True
    assert result.value is msgspec.UNSET
    assert result.content == ({"type": "text", "text": "Error: disk on fire"},)
    assert (
        result.error is not None
        and result.error.message == "disk on fire"
        and result.error.info is None
    )


async def test_an_unknown_tool_fails_with_unknown_tool():
    session = Session()
    result = await session.call("nope", {})
    assert result.error is not None
    assert (result.error.message, result.error.code) == ('unknown tool "nope"', "UNKNOWN_TOOL")
    assert result.content == ({"type": "text", "text": 'Error: unknown tool "nope"'},)


async def test_call_logs_turn_step_call_and_result_with_raw_argument_text(log_path):
    with Session(tools=[add], log=log_path) as session:
        await session.call("add", '{"a": 1}', call_id="c1")
    with Session(log=log_path) as session:
        events = session.log.read()
    assert [type(e) for e in events] == [
        TurnStart,
        StepStart,
        ToolCall,
        ToolResult,
        StepEnd,
        TurnEnd,
    ]
    call, result = events[2], events[3]
    assert call.arguments == '{"a": 1}'
    assert result.source_event_seqs == (call.seq,)
    assert result.content == ({"type": "text", "text": "2"},)
    assert result.message.source.call_id == "c1"


async def test_empty_argument_text_means_empty_object_and_non_json_is_passed_on():
    seen = []

    @tool
    def probe() -> str:
        return "ok"

    session = Session(tools=[probe, add])
    assert (await session.call("probe", "")).value == "ok"
    result = await session.call("add", "{not json")
    assert result.error is not None
    assert result.error.message == "invalid arguments: arguments must be an object"
    assert result.error.code == "INVALID_ARGS"
    assert seen == []


def test_registration_refuses_reserved_and_duplicate_names():
    session = Session(tools=[add])
    with pytest.raises(ReservedToolError):
        session.register(tool(name="run_code")(lambda code: code))
    with pytest.raises(DuplicateToolError):
        session.register(add)


def test_register_returns_a_disposer():
    session = Session()
    dispose = session.register(add)
    assert [d.name for d in session.visible_tools()] == ["add"]
    dispose()
    dispose()
    assert session.visible_tools() == []


async def test_unencodable_text_never_breaks_the_log(log_path):
    def body(args, ctx):
        raise ValueError("bad byte \udcff")

    from conftest import make_tool

    with Session(tools=[make_tool("t", body), make_tool("echo")], log=log_path) as session:
        failed = await session.call("t", {})
        weird = await session.call("echo", '{"x": "\ud800"}')
        events = session.log.read()
    assert failed.error.message == "bad byte \\udcff"
    assert weird.is_error
    assert (
        weird.error.message
        == "arguments must be losslessly JSON-serializable: string with an unpaired surrogate at $"
    )
    assert [e.arguments for e in events if isinstance(e, ToolCall)][1] == '{"x": "\\ud800"}'
