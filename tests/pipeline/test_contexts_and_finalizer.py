"""additionalContexts (docs/pipeline-spec.md §8) and finalize_content (§7)."""

import msgspec

from codemode.pipeline import Accept, Block, CallResult, Deny, Session, Signal

from conftest import Published, error_text, inp, make_tool


async def test_deferred_then_wrapper_then_post_contexts_keep_order():
    async def body(args, ctx):
        ctx.defer_context("body-1")
        ctx.defer_context([{"type": "text", "text": "body-2"}])
        return "ok"

    session = Session(tools=[make_tool("t", body)])

    async def wrapper(execution, next):
        result = await next()
        return msgspec.structs.replace(result, additional_contexts=("wrapper",))

    session.on("tools/execute", wrapper)
    session.on("tools/post-execute", lambda e, r, n: Accept(additional_contexts=["post"]))
    result = await session.execute(inp("t"))
    assert result.additional_contexts == (
        "body-1",
        [{"type": "text", "text": "body-2"}],
        "wrapper",
        "post",
    )


async def test_a_body_that_throws_keeps_its_deferred_contexts():
    async def body(args, ctx):
        ctx.defer_context("partial progress")
        raise RuntimeError("failed halfway")

    session = Session(tools=[make_tool("t", body)])
    result = await session.execute(inp("t"))
    assert result.content == error_text("failed halfway")
    assert result.additional_contexts == ("partial progress",)


async def test_an_outer_block_drops_deferred_contexts():
    async def body(args, ctx):
        ctx.defer_context("deferred")
        return "ok"

    session = Session(tools=[make_tool("t", body)])
    session.on(
        "tools/post-execute", lambda e, r, n: Block("blocked", additional_contexts=["block's own"])
    )
    result = await session.execute(inp("t"))
    assert result.additional_contexts == ("block's own",)


async def test_final_route_failures_carry_no_contexts():
    async def body(args, ctx):
        ctx.defer_context("deferred")
        return "ok"

    session = Session(tools=[make_tool("t", body)])

    def broken(execution, result, next):
        raise RuntimeError("post broke")

    session.on("tools/post-execute", broken)
    result = await session.execute(inp("t"))
    assert result.error.message == "post broke" and result.additional_contexts == ()


async def test_finalizer_runs_after_normalization_and_may_replace_content():
    seen = []

    def finalize(execution, result):
        seen.append((execution.name, result.is_error, result.content))
        return [{"type": "text", "text": result.content[0]["text"][:3]}]

    session = Session(tools=[make_tool("t", lambda a, c: "abcdef", finalize_content=finalize)])
    session.on("tools/post-execute", lambda e, r, n: Accept(content="replaced"))
    result = await session.execute(inp("t"))
    assert seen == [("t", False, ({"type": "text", "text": "replaced"},))]
    assert result.content == ({"type": "text", "text": "rep"},)
    assert result.value == "abcdef"


async def test_a_finalizer_returning_none_keeps_content():
    session = Session(tools=[make_tool("t", lambda a, c: "v", finalize_content=lambda e, r: None)])
    result = await session.execute(inp("t"))
    assert result.content == ({"type": "text", "text": "v"},)


async def test_a_raising_finalizer_is_normalized_without_a_second_call():
    calls = []

    def finalize(execution, result):
        calls.append(result.is_error)
        raise ValueError("finalizer broke")

    session = Session(tools=[make_tool("t", lambda a, c: "v", finalize_content=finalize)])
    published = Published(session)
    result = await session.execute(inp("t"))
    assert calls == [False]
    assert result.content == error_text("finalizer broke")
    assert result.value is msgspec.UNSET and published.results == [result]


async def test_an_async_finalizer_is_a_bug_that_fails_the_call():
    async def finalize(execution, result):
        return None

    session = Session(tools=[make_tool("t", lambda a, c: "v", finalize_content=finalize)])
    result = await session.execute(inp("t"))
    assert (
        result.error.message == "finalize_content must be synchronous, but it returned an awaitable"
    )


async def test_the_finalizer_runs_for_errors_found_while_snapshotting_non_content_fields():
    seen = []

    def finalize(execution, result):
        seen.append(result.content)
        return None

    session = Session(tools=[make_tool("t", lambda a, c: "v", finalize_content=finalize)])

    async def wrapper(execution, next):
        return CallResult.failure("wrapper failure", meta={"bad": float("inf")})

    session.on("tools/execute", wrapper)
    result = await session.execute(inp("t"))
    assert (
        result.error.message
        == "meta must be losslessly JSON-serializable: non-finite number at $.bad"
    )
    assert seen == [
        error_text("meta must be losslessly JSON-serializable: non-finite number at $.bad")
    ]


async def test_a_malformed_post_execute_context_becomes_an_error_result_and_is_still_finalized():
    seen = []

    def finalize(execution, result):
        seen.append(result.error.message)

    session = Session(tools=[make_tool("t", lambda a, c: "v", finalize_content=finalize)])
    session.on(
        "tools/post-execute",
        lambda e, r, n: msgspec.structs.replace(Accept(), additional_contexts=[object()]),
    )
    result = await session.execute(inp("t"))
    assert result.error.message == "additional context must be a string or a list of content blocks"
    assert seen == [result.error.message]


async def test_the_finalizer_runs_for_denials_pre_aborted_calls_and_invalid_arguments():
    seen = []
    session = Session(
        tools=[make_tool("t", finalize_content=lambda e, r: seen.append(r.error.message))]
    )
    session.on(
        "tools/pre-execute", lambda e, n: Deny("nope") if e.arguments == {"deny": True} else n()
    )
    await session.execute(inp("t", {"deny": True}))
    await session.execute(inp("t", signal=Signal.aborted_with()))
    await session.execute(inp("t", {"x": float("nan")}))
    assert seen == [
        "nope",
        "tool call aborted before dispatch",
        "arguments must be losslessly JSON-serializable: non-finite number at $.x",
    ]


async def test_the_finalizer_is_snapshotted_when_the_call_starts():
    seen = []
    first = make_tool("t", finalize_content=lambda e, r: seen.append("first"))
    second = make_tool("t", finalize_content=lambda e, r: seen.append("second"))
    session = Session()
    dispose = session.register(first)

    async def swap(execution, next):
        dispose()
        session.register(second)
        return await next()

    session.on("tools/pre-execute", swap)
    await session.execute(inp("t"))
    assert seen == ["first"]


async def test_deferring_a_malformed_context_raises_in_the_body():
    async def body(args, ctx):
        ctx.defer_context(42)
        return "ok"

    session = Session(tools=[make_tool("t", body)])
    result = await session.execute(inp("t"))
    assert result.is_error
    assert result.error.message == "additional context must be a string or a list of content blocks"


async def test_code_dispatch_log_listeners_replace_logged_content_and_raising_ones_are_contained():
    session = Session(tools=[make_tool("t", lambda a, c: "x" * 100)])
    result = await session.execute(inp("t", parent=object()))
    assert await session.code_dispatch_content(None, result) == result.content

    session.on(
        "tools/code-dispatch-log",
        lambda e, r, content, next: [{"type": "text", "text": "[spilled]"}],
    )
    assert await session.code_dispatch_content(None, result) == (
        {"type": "text", "text": "[spilled]"},
    )

    broken = Session()

    def boom(execution, result, content, next):
        raise RuntimeError("log listener broke")

    broken.on("tools/code-dispatch-log", boom)
    assert await broken.code_dispatch_content(None, result) == result.content
