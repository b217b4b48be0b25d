"""Cancellation matrix (docs/pipeline-spec.md §6, S7, S8, S10, S11)."""

import asyncio

import msgspec
import pytest

from codemode.pipeline import Accept, CallResult, Deny, Session, Signal

from conftest import Published, error_text, inp, make_tool

ABORTED = error_text("tool call aborted")
ABORTED_BEFORE = error_text("tool call aborted before dispatch")


def body_tool(name="t", value="ok", calls=None):
    async def body(args, ctx):
        if calls is not None:
            calls.append(ctx.signal)
        return value

    return make_tool(name, body)


async def test_abort_during_pre_execute_is_aborted_before_dispatch():
    calls = []
    session = Session(tools=[body_tool(calls=calls)])
    signal = Signal()

    async def listener(execution, next):
        signal.abort()
        return await next()

    session.on("tools/pre-execute", listener)
    post = []
    session.on("tools/post-execute", lambda e, r, n: post.append(r.error.code) or n())
    result = await session.execute(inp("t", signal=signal))
    assert result.content == ABORTED_BEFORE
    assert (result.error.info.name, result.error.code) == ("AbortError", "ABORTED_BEFORE_DISPATCH")
    assert calls == [] and post == ["ABORTED_BEFORE_DISPATCH"]


async def test_a_denial_settling_after_abort_is_kept():
    session = Session(tools=[body_tool()])
    signal = Signal()

    async def listener(execution, next):
        signal.abort()
        return Deny("policy says no")

    session.on("tools/pre-execute", listener)
    result = await session.execute(inp("t", signal=signal))
    assert result.content == error_text("policy says no")


async def test_abort_after_a_wrapper_delegates_is_aborted_and_the_body_sees_it():
    calls = []

    async def body(args, ctx):
        calls.append(ctx.signal.aborted)
        return "ok"

    session = Session(tools=[make_tool("t", body)])
    signal = Signal()

    async def wrapper(execution, next):
        result = await next()
        signal.abort()
        return result

    session.on("tools/execute", wrapper)
    result = await session.execute(inp("t", signal=signal))
    assert calls == [False]
    assert result.content == ABORTED and result.error.code == "ABORTED"


async def test_a_wrapper_passing_an_aborted_signal_prevents_the_body():
    calls = []
    session = Session(tools=[body_tool(calls=calls)])

    async def wrapper(execution, next):
        execution.signal = Signal.aborted_with("wrapper budget")
        return await next()

    session.on("tools/execute", wrapper)
    result = await session.execute(inp("t"))
    assert result.content == ABORTED_BEFORE and calls == []


async def test_abort_overtakes_a_wrapper_short_circuit_success():
    session = Session(tools=[body_tool()])
    signal = Signal()

    async def wrapper(execution, next):
        signal.abort()
        return CallResult.success("cached")

    session.on("tools/execute", wrapper)
    result = await session.execute(inp("t", signal=signal))
    assert result.content == ABORTED_BEFORE


async def test_a_late_success_is_aborted_and_keeps_its_contexts():
    signal = Signal()

    async def body(args, ctx):
        ctx.defer_context("keep me")
        signal.abort()
        return "late"

    session = Session(tools=[make_tool("t", body)])
    result = await session.execute(inp("t", signal=signal))
    assert result.content == ABORTED and result.additional_contexts == ("keep me",)


async def test_a_late_post_execute_success_is_aborted():
    signal = Signal()
    session = Session(tools=[body_tool()])

    async def listener(execution, result, next):
        signal.abort()
        return Accept(additional_contexts=["ctx"])

    session.on("tools/post-execute", listener)
    result = await session.execute(inp("t", signal=signal))
    assert result.content == ABORTED and result.additional_contexts == ("ctx",)


@pytest.mark.parametrize("where", ["wrapper", "tool", "post"])
async def test_failures_settling_after_abort_are_kept(where):
    signal = Signal()

    async def body(args, ctx):
        if where == "tool":
            signal.abort()
            raise RuntimeError("tool failed")
        return "ok"

    session = Session(tools=[make_tool("t", body)])
    if where == "wrapper":
        async def wrapper(execution, next):
            await next()
            signal.abort()
            return CallResult.failure("wrapper failed")

        session.on("tools/execute", wrapper)
    if where == "post":
        def post(execution, result, next):
            signal.abort()
            raise RuntimeError("post failed")

        session.on("tools/post-execute", post)
    result = await session.execute(inp("t", signal=signal))
    assert result.content == error_text(f"{where} failed")


async def test_the_caller_signal_is_fused_into_a_wrapper_replacement_and_restored_after():
    seen = {}
    caller = Signal()

    async def body(args, ctx):
        seen["body_signal"] = ctx.signal
        caller.abort("caller gave up")
        seen["fused_aborted"] = ctx.signal.aborted
        return "ok"

    session = Session(tools=[make_tool("t", body)])
    replacement = Signal()

    async def wrapper(execution, next):
        execution.signal = replacement
        result = await next()
        seen["after"] = execution.signal
        return result

    session.on("tools/execute", wrapper)
    result = await session.execute(inp("t", signal=caller))
    assert seen["fused_aborted"] is True
    assert seen["body_signal"] is not replacement
    assert seen["after"] is replacement
    assert replacement.aborted is False
    assert result.content == ABORTED


async def test_a_wrapper_cannot_remove_the_signal():
    session = Session(tools=[body_tool()])

    async def wrapper(execution, next):
        execution.signal = None
        return await next()

    session.on("tools/execute", wrapper)
    result = await session.execute(inp("t"))
    assert result.error.message == "the execution's signal can only be replaced by another Signal"


async def test_an_uncooperative_body_is_awaited_before_aborted():
    signal = Signal()
    finished = []

    async def body(args, ctx):
        signal.abort()
        await asyncio.sleep(0.05)  # ignores the signal
        finished.append(True)
        return "done anyway"

    session = Session(tools=[make_tool("t", body)])
    result = await session.execute(inp("t", signal=signal))
    assert finished == [True] and result.content == ABORTED


async def test_a_pre_aborted_call_publishes_one_frozen_result_with_a_detached_argument_copy():
    calls = []
    session = Session(tools=[body_tool(calls=calls)])
    published = Published(session)
    seen = []
    session.on("tools/pre-execute", lambda e, n: seen.append("pre") or n())
    args = {"list": [1, 2]}
    result = await session.execute(inp("t", args, signal=Signal.aborted_with()))
    args["list"].append(3)
    assert result.content == ABORTED_BEFORE
    assert calls == [] and seen == []
    [(execution, published_result)] = published.items
    assert published_result is result
    assert execution.arguments == {"list": [1, 2]}
    with pytest.raises((TypeError, AttributeError)):
        result.is_error = False


async def test_argument_failure_wins_over_pre_abort():
    session = Session(tools=[body_tool()])
    result = await session.execute(inp("t", {"x": {1, 2}}, signal=Signal.aborted_with()))
    assert result.content == error_text(
        "arguments must be losslessly JSON-serializable: unsupported type set at $.x"
    )
    assert result.error.info is None


async def test_cancelling_the_awaiting_task_counts_as_the_caller_aborting():
    started = asyncio.Event()
    published = []

    async def body(args, ctx):
        started.set()
        await ctx.signal.wait()
        return "stopped"

    session = Session(tools=[make_tool("t", body)])
    session.on("tools/result", lambda e, r: published.append(r))
    task = asyncio.ensure_future(session.execute(inp("t")))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [r.error.code for r in published] == ["ABORTED"]


async def test_a_tool_error_after_cancellation_is_not_replaced():
    signal = Signal()

    async def body(args, ctx):
        signal.abort()
        raise ValueError("backend said 500")

    session = Session(tools=[make_tool("t", body)])
    result = await session.execute(inp("t", signal=signal))
    assert result.content == error_text("backend said 500")
    assert result.value is msgspec.UNSET


async def test_a_body_raising_cancelled_error_by_itself_is_a_normal_failure():
    async def body(args, ctx):
        raise asyncio.CancelledError()

    session = Session(tools=[make_tool("t", body)])
    result = await session.execute(inp("t"))
    assert result.content == error_text("CancelledError")


async def test_cancelling_a_task_driving_the_phases_directly_propagates():
    started = asyncio.Event()

    async def body(args, ctx):
        started.set()
        await asyncio.sleep(10)
        return "never"

    session = Session(tools=[make_tool("t", body)])
    pending = await session.start(inp("t"))
    task = asyncio.ensure_future(pending.dispatch())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
