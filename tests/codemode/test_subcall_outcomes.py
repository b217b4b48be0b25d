"""Every sub-call has exactly one governed, recorded outcome that nobody can misread
(PIPELINE.md §5, §10, §11.4): what a program sees, what the log keeps, what policy saw."""

import sys

import pytest

from codemode import CodeMode, Session, events, tool
from codemode.pipeline.hooks import python_hook


@tool(concurrency_safe=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def quits(status: int = 2) -> None:
    """Calls sys.exit, as argparse does on bad input."""
    sys.exit(status)


@pytest.fixture
def session(tmp_path):
    s = Session(tools=[add, quits], log=str(tmp_path / "session.jsonl"))
    CodeMode(s)
    yield s
    s.close()


def of(session, kind):
    return [e for e in session.log.read() if isinstance(e, kind)]


async def run(session, code, **kwargs):
    return await session.call("run_code", {"code": code}, **kwargs)


CATCH = ("try:\n    {call}\nexcept ToolCallError as e:\n"
         "    r = [type(e).__name__, e.code, e.message]\nr")


async def test_a_sub_call_body_raising_system_exit_is_a_rejection_not_an_exit(session):
    result = await run(session, CATCH.format(call="quits()") + "\n[r, add(a=1, b=2)]")
    assert not result.is_error, result.text
    rejection, after = result.value["result"]
    assert rejection == ["ToolError", "TOOL_EXITED", 'tool "quits" raised SystemExit(2)']
    assert after == 3
    starts, settles = of(session, events.CodeDispatchStart), of(session, events.CodeDispatch)
    assert [e.name for e in starts] == [e.name for e in settles] == ["quits", "add"]
    assert settles[0].is_error and not settles[1].is_error
    assert len(of(session, events.ToolCall)) == len(of(session, events.ToolResult)) == 1


async def test_a_raising_python_hook_is_hook_failed_in_the_program_not_a_tool_error(session):
    ran = []

    @tool(concurrency_safe=True)
    def side_effect() -> str:
        """Records that it ran."""
        ran.append(1)
        return "ran"

    session.register(side_effect)

    def broken(execution):
        raise RuntimeError("policy service is down")

    python_hook(session, "tools/pre-execute", broken, matcher="side_effect", handler_id="policy")
    result = await run(session, CATCH.format(call="side_effect()"))
    assert result.value["result"] == [
        "ToolCallError", "HOOK_FAILED", 'hook "policy" failed: RuntimeError: policy service is down']
    assert ran == []
