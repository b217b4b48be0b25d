"""Stage order, wrappers and dispatch normalization (docs/pipeline-spec.md S8–S10, §5)."""

import asyncio

import msgspec
import pytest

from codemode.pipeline import (
    CallResult,
    Deny,
    HarnessError,
    Session,
    Signal,
    retry_wrapper,
    timeout_wrapper,
    tool,
)

from conftest import Published, error_text, inp, make_tool


@tool(presentation_meta=lambda args, value: {"len": len(value)})
def shout(text: str) -> str:
    return text.upper()


async def test_registration_order_is_composition_order():
    order = []
    session = Session(tools=[make_tool("t", lambda a, c: order.append("body") or "ok")])

    def wrapper(label):
        async def wrap(execution, next):
            order.append(f"{label}>")
            result = await next()
            order.append(f"<{label}")
            return result

        return wrap

    session.on("tools/execute", wrapper("a"))
    session.on("tools/execute", wrapper("b"))
    await session.execute(inp("t"))
    assert order == ["a>", "b>", "body", "<b", "<a"]


async def test_deny_skips_tools_execute():
    wrapped = []
    session = Session(tools=[make_tool("t")])
    session.on("tools/execute", lambda e, n: wrapped.append(1) or n())
    session.on("tools/pre-execute", lambda e, n: Deny("no"))
    await session.execute(inp("t"))
    assert wrapped == []


async def test_a_thrown_tool_is_normalized_before_a_wrapper_sees_it_and_reaches_post_execute():
    seen = []
    session = Session(tools=[make_tool("t", lambda a, c: 1 / 0)])

    async def wrapper(execution, next):
        result = await next()
        seen.append(("wrapper", type(result).__name__, result.error.message))
        return result

    session.on("tools/execute", wrapper)
    session.on("tools/post-execute", lambda e, r, n: seen.append(("post", r.error.message)) or n())
    await session.execute(inp("t"))
    assert seen == [("wrapper", "CallResult", "division by zero"), ("post", "division by zero")]


async def test_outcomes_are_frozen_before_wrappers_and_post_execute_see_them():
    problems = []
    session = Session(tools=[make_tool("t", lambda a, c: {"items": [1]})])

    def mutate(result):
        for attempt in (
            lambda: setattr(result, "is_error", True),
            lambda: result.value["items"].append(2),
            lambda: result.content[0].update(text="x"),
        ):
            try:
                attempt()
            except (TypeError, AttributeError):
                problems.append(1)

    async def wrapper(execution, next):
        result = await next()
        mutate(result)
        return result

    session.on("tools/execute", wrapper)
    session.on("tools/post-execute", lambda e, r, n: mutate(r) or n())
    result = await session.execute(inp("t"))
    assert len(problems) == 6 and result.value == {"items": [1]}


async def test_a_wrapper_may_short_circuit_and_its_success_is_re_rendered():
    ran = []

    @tool(name="shout", presentation_meta=lambda args, value: {"len": len(value)})
    def counted_shout(text: str) -> str:
        ran.append(text)
        return text.upper()

    session = Session(tools=[counted_shout])
    session.on(
        "tools/execute", lambda e, n: CallResult.success("CACHED", content="ignored", meta={"x": 1})
    )
    result = await session.execute(inp("shout", {"text": "hi"}))
    assert ran == []
    assert (result.value, result.content, result.meta) == (
        "CACHED",
        ({"type": "text", "text": "CACHED"},),
        {"len": 6},
    )


async def test_a_cached_result_from_another_dispatch_is_revalidated():
    session = Session(tools=[shout, make_tool("number", lambda a, c: 42)])
    cache = {}

    async def caching(execution, next):
        if "hit" in cache:
            return cache["hit"]
        cache["hit"] = result = await next()
        return result

    session.on("tools/execute", caching)
    await session.execute(inp("number"))
    result = await session.execute(inp("shout", {"text": "x"}))
    assert result.content == error_text(
        'tool "shout" returned invalid output: value must be a string'
    )
    assert result.error.code == "INVALID_TOOL_OUTPUT"


async def test_wrapper_contexts_are_kept():
    session = Session(tools=[make_tool("t")])

    async def wrapper(execution, next):
        return msgspec.structs.replace(await next(), additional_contexts=("from wrapper",))

    session.on("tools/execute", wrapper)
    assert (await session.execute(inp("t"))).additional_contexts == ("from wrapper",)


async def test_a_wrapper_returning_a_non_result_fails_on_the_final_route():
    session = Session(tools=[make_tool("t")])
    post = []
    session.on("tools/post-execute", lambda e, r, n: post.append(1) or n())
    session.on("tools/execute", lambda e, n: "nope")
    result = await session.execute(inp("t"))
    assert result.error.message == "tools/execute wrapper returned str, not a CallResult"
    assert post == []


@pytest.mark.parametrize("point", ["tools/pre-execute", "tools/execute", "tools/post-execute"])
async def test_listener_throws_become_errors_with_typed_codes_kept(point):
    class Boom(HarnessError):
        code = "BOOM"

    def listener(*args):
        raise Boom(f"{point} exploded")

    session = Session(tools=[make_tool("t")])
    session.on(point, listener)
    result = await session.execute(inp("t"))
    assert result.content == error_text(f"{point} exploded")
    assert (result.error.info.name, result.error.code) == ("Boom", "BOOM")


async def test_a_wrapper_throw_skips_post_execute():
    session = Session(tools=[make_tool("t")])
    post = []
    session.on("tools/post-execute", lambda e, r, n: post.append(1) or n())

    async def wrapper(execution, next):
        await next()
        raise RuntimeError("metrics backend down")

    session.on("tools/execute", wrapper)
    result = await session.execute(inp("t"))
    assert result.error.message == "metrics backend down" and post == []


async def test_unknown_tool_at_dispatch_still_runs_post_execute_and_policy_sees_the_name():
    names = []
    session = Session()
    session.on("tools/pre-execute", lambda e, n: names.append(e.name) or n())
    post = []
    session.on("tools/post-execute", lambda e, r, n: post.append(r.error.code) or n())
    result = await session.execute(inp("ghost"))
    assert result.content == error_text('unknown tool "ghost"')
    assert names == ["ghost"] and post == ["UNKNOWN_TOOL"]


# -- reference wrappers -----------------------------------------------------------------


async def test_timeout_wrapper_replaces_the_result_when_its_deadline_fires():
    async def slow(args, ctx):
        await ctx.signal.wait()
        return "finished"

    session = Session(tools=[make_tool("slow", slow, timeout_ms=20), make_tool("fast")])
    session.on("tools/execute", timeout_wrapper)
    result = await session.execute(inp("slow"))
    assert result.content == error_text("tool call timed out after 20ms")
    assert (result.error.info.name, result.error.code) == ("ToolTimeoutError", "TOOL_TIMEOUT")
    assert (await session.execute(inp("fast", {"a": 1}))).value == {"a": 1}


async def test_timeout_is_not_replaced_by_caller_cancellation_and_caller_abort_is_not_a_timeout():
    caller = Signal()

    async def slow(args, ctx):
        await ctx.signal.wait()
        return "stopped"

    session = Session(tools=[make_tool("slow", slow, timeout_ms=5000)])
    session.on("tools/execute", timeout_wrapper)
    task = asyncio.ensure_future(session.execute(inp("slow", signal=caller)))
    await asyncio.sleep(0.01)
    caller.abort()
    result = await task
    assert result.error.code == "ABORTED"


async def test_retry_wrapper_retries_failures_until_success():
    attempts = []

    async def flaky(args, ctx):
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("reset by peer")
        return "ok"

    session = Session(tools=[make_tool("flaky", flaky)])
    session.on("tools/execute", retry_wrapper(max_attempts=3))
    result = await session.execute(inp("flaky"))
    assert (result.value, len(attempts)) == ("ok", 3)


async def test_retry_stops_when_the_caller_aborts():
    attempts = []
    caller = Signal()

    async def flaky(args, ctx):
        attempts.append(1)
        caller.abort()
        raise ConnectionError("reset")

    session = Session(tools=[make_tool("flaky", flaky)])
    session.on("tools/execute", retry_wrapper(max_attempts=5, backoff_ms=1))
    result = await session.execute(inp("flaky", signal=caller))
    assert len(attempts) == 1 and result.error.message == "reset"


async def test_timeout_registered_before_retry_bounds_all_attempts():
    attempts = []

    async def hangs(args, ctx):
        attempts.append(1)
        await ctx.signal.wait()
        raise ConnectionError("interrupted")

    session = Session(tools=[make_tool("h", hangs, timeout_ms=30)])
    session.on("tools/execute", timeout_wrapper)
    session.on("tools/execute", retry_wrapper(max_attempts=5))
    result = await session.execute(inp("h"))
    assert result.error.code == "TOOL_TIMEOUT" and len(attempts) == 1


async def test_tools_result_observer_failures_change_nothing():
    session = Session(tools=[make_tool("t", lambda a, c: "v")])
    seen = []

    def raising(execution, result):
        raise RuntimeError("observer broke")

    async def failing(execution, result):
        raise RuntimeError("async observer broke")

    session.on("tools/result", raising)
    session.on("tools/result", failing)
    session.on("tools/result", lambda e, r: seen.append(r))
    result = await session.execute(inp("t"))
    await asyncio.sleep(0)
    await session.aclose()
    assert result.value == "v" and seen == [result]


async def test_observers_get_the_very_same_frozen_result_and_execution_once():
    session = Session(tools=[make_tool("t")])
    published = Published(session)
    result = await session.execute(inp("t", {"a": 1}, call_id="c7"))
    [(execution, published_result)] = published.items
    assert published_result is result
    assert (execution.call_id, execution.root_call_id, execution.name) == ("c7", "c7", "t")
    with pytest.raises(AttributeError):
        execution.name = "x"
