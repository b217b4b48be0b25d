"""Anything thrown is a result (docs/pipeline-spec.md §5): a body, wrapper, listener, guard, hook,
finalizer or observer that raises any BaseException (SystemExit from argparse included)
never ends the host process, never leaves a `tool/call` without its `tool/result`, and a
failing listener is told apart from a failing tool (HOOK_FAILED vs TOOL_EXITED / no code)."""

from __future__ import annotations

import argparse
import asyncio
import sys

import pytest

from codemode.pipeline import AbortedError, Accept, Allow, Session, ToolTimeoutError, events, tool
from codemode.pipeline.hooks import command_hook, python_hook

from conftest import error_text, inp, make_tool


class Custom(BaseException):
    """A BaseException of a tool's own."""


@tool
def parse(argv: list[str]) -> str:
    """A tool that parses a command line with argparse (which calls sys.exit on bad input)."""
    parser = argparse.ArgumentParser(prog="parse", add_help=False)
    parser.add_argument("--count", type=int, required=True)
    return f"count={parser.parse_args(argv).count}"


def balanced(session: Session) -> None:
    log = session.log.read()
    calls = [e.call_id for e in log if isinstance(e, events.ToolCall)]
    results = [e.call_id for e in log if isinstance(e, events.ToolResult)]
    assert calls == results
    assert isinstance(log[-1], events.TurnEnd)


async def test_argparse_exiting_on_bad_input_is_a_failed_result(tmp_path, capsys):
    session = Session(tools=[parse], log=tmp_path / "session.jsonl")
    bad = await session.call("parse", {"argv": ["--count", "many"]})
    assert bad.is_error
    assert bad.error.code == "TOOL_EXITED"
    assert bad.error.message == 'tool "parse" raised SystemExit(2)'
    assert bad.content == error_text('tool "parse" raised SystemExit(2)')
    ok = await session.call("parse", {"argv": ["--count", "3"]})  # the host is still here
    assert ok.value == "count=3"
    balanced(session)
    [first, _] = [e for e in session.log.read() if isinstance(e, events.ToolResult)]
    assert first.error == events.ErrorInfo(name="ToolExitError", code="TOOL_EXITED")
    session.close()


@pytest.mark.parametrize(
    "thrown, shown",
    [
        (SystemExit(3), "SystemExit(3)"),
        (SystemExit("bye"), "SystemExit('bye')"),
        (KeyboardInterrupt(), "KeyboardInterrupt"),
        (GeneratorExit(), "GeneratorExit"),
        (Custom("mine"), "Custom: mine"),
    ],
)
@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_every_base_exception_from_a_body_is_contained(thrown, shown, kind):
    if kind == "async":

        async def body(args, ctx):
            raise thrown

        defn = make_tool("t", body)
    else:

        @tool(name="t")
        def defn() -> None:
            raise thrown

    session = Session(tools=[defn])
    result = await session.call("t", {})
    assert result.error.code == "TOOL_EXITED"
    assert result.error.message == f'tool "t" raised {shown}'
    balanced(session)


async def test_a_base_exception_in_one_parallel_call_leaves_the_others_alone():
    @tool(concurrency_safe=True)
    async def sleepy() -> str:
        await asyncio.sleep(0.05)
        return "slept"

    @tool(concurrency_safe=True)
    def quits() -> None:
        sys.exit(1)

    session = Session(tools=[sleepy, quits])
    results = await session.call_batch([("sleepy", {}), ("quits", {}), ("sleepy", {})])
    assert [r.is_error for r in results] == [False, True, False]
    assert results[1].error.code == "TOOL_EXITED"
    balanced(session)


def _raiser(thrown):
    def raise_it(*args):
        raise thrown

    return raise_it


@pytest.mark.parametrize(
    "point, where",
    [
        ("tools/pre-execute", "a tools/pre-execute listener"),
        ("tools/execute", "a tools/execute wrapper"),
        ("tools/post-execute", "a tools/post-execute listener"),
    ],
)
async def test_a_listener_raising_system_exit_fails_the_call_hook_failed(point, where):
    ran = []

    async def body(args, ctx):
        ran.append(1)
        return "ran"

    session = Session(tools=[make_tool("t", body)])
    session.on(point, _raiser(SystemExit(4)))
    result = await session.call("t", {})
    assert result.error.code == "HOOK_FAILED"
    assert result.error.message == f"{where} raised SystemExit(4)"
    assert ran == ([1] if point == "tools/post-execute" else [])
    balanced(session)


async def test_a_raising_guard_is_hook_failed_and_skips_the_body():
    ran = []
    session = Session(tools=[make_tool("t", lambda args, ctx: ran.append(1))])
    session.guard(_raiser(KeyboardInterrupt()))
    result = await session.call("t", {})
    assert result.error.code == "HOOK_FAILED"
    assert result.error.message == "a guard raised KeyboardInterrupt"
    assert ran == []


async def test_a_listener_exception_keeps_its_message_and_is_hook_failed():
    session = Session(tools=[make_tool("t")])
    session.on("tools/pre-execute", _raiser(RuntimeError("listener broke")))
    result = await session.execute(inp("t"))
    assert (result.error.code, result.error.message) == ("HOOK_FAILED", "listener broke")
    assert result.error.info.name == "HookError"


@pytest.mark.parametrize(
    "thrown, code",
    [
        (AbortedError("stop"), "ABORTED"),
        (ToolTimeoutError("too slow"), "TOOL_TIMEOUT"),
    ],
)
async def test_a_typed_error_from_a_listener_keeps_its_code(thrown, code):
    session = Session(tools=[make_tool("t")])
    session.on("tools/pre-execute", _raiser(thrown))
    assert (await session.execute(inp("t"))).error.code == code


async def test_an_invalid_decision_is_the_listener_s_failure():
    session = Session(tools=[make_tool("t")])
    session.on("tools/pre-execute", lambda execution, next: "yes")
    result = await session.execute(inp("t"))
    assert result.error.code == "HOOK_FAILED"
    assert result.error.message == "tools/pre-execute returned an invalid decision (str)"


async def test_a_finalizer_raising_system_exit_is_contained():
    session = Session(tools=[make_tool("t", finalize_content=_raiser(SystemExit(5)))])
    result = await session.execute(inp("t"))
    assert result.error.code == "TOOL_EXITED"
    assert result.error.message == 'tool "t" raised SystemExit(5)'


async def test_observers_raising_base_exceptions_change_nothing():
    session = Session(tools=[make_tool("t")])
    session.on("tools/result", _raiser(SystemExit(6)))

    async def async_observer(execution, result):
        raise SystemExit(7)

    session.on("tools/result", async_observer)
    result = await session.call("t", {"x": 1})
    assert result.value == {"x": 1}
    await session.aclose()  # the async observer ran (and was contained) by now


async def test_an_approval_answerer_raising_system_exit_is_unavailable():
    session = Session(tools=[make_tool("t")], approval="ask")
    session.on("tools/pre-execute", lambda execution, next: __import__("codemode").Ask("check"))
    session.on("approval/answer", _raiser(SystemExit(8)))
    result = await session.call("t", {}, agent="main")
    assert result.denied
    assert (
        result.error.message == 'tool "t" requires approval, but no approval channel is available'
    )


async def test_a_tools_changed_listener_and_a_classifier_raising_are_contained():
    session = Session()
    session.on("tools/changed", _raiser(SystemExit(9)))
    session.register(make_tool("t", is_concurrency_safe=_raiser(SystemExit(10))))
    assert session.classify("t", {}) == "exclusive"
    assert (await session.call("t", {"a": 1})).value == {"a": 1}


async def test_a_raising_code_dispatch_log_listener_is_contained_even_for_system_exit():
    session = Session(tools=[make_tool("t")])
    session.on("tools/code-dispatch-log", _raiser(SystemExit(11)))
    result = await session.execute(inp("t"))
    assert await session.code_dispatch_content(None, result) == result.content


async def test_a_python_hook_raising_system_exit_is_hook_failed():
    session = Session(tools=[make_tool("t")])
    python_hook(session, "tools/pre-execute", _raiser(SystemExit(12)), handler_id="h")
    result = await session.call("t", {})
    assert result.error.code == "HOOK_FAILED"
    assert result.error.message == 'hook "h" failed: SystemExit(12)'
    balanced(session)


async def test_a_command_hook_that_cannot_even_be_spawned_is_hook_failed():
    session = Session(tools=[make_tool("t")])
    command_hook(session, "tools/pre-execute", [sys.executable, "-c", "pass\0"], handler_id="nul")
    result = await session.call("t", {})
    assert result.error.code == "HOOK_FAILED"
    assert result.error.message.startswith('hook "nul" could not be started: ')


async def test_the_pipeline_s_own_cancellation_still_propagates():
    started = asyncio.Event()

    async def body(args, ctx):
        started.set()
        await ctx.signal.wait()
        return "stopped"

    session = Session(tools=[make_tool("t", body)])
    task = asyncio.ensure_future(session.call("t", {}))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    balanced(session)
    [result] = [e for e in session.log.read() if isinstance(e, events.ToolResult)]
    assert result.error.code == "ABORTED"


async def test_accept_still_works_after_a_contained_failure():
    session = Session(tools=[make_tool("t")])
    session.on("tools/pre-execute", lambda execution, next: Allow())
    session.on("tools/post-execute", lambda execution, result, next: Accept())
    assert (await session.call("t", {"k": "v"})).value == {"k": "v"}
