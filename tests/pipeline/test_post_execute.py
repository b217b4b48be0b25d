"""tools/post-execute decisions (docs/pipeline-spec.md S11)."""

import msgspec
import pytest

from codemode.pipeline import Accept, Block, Deny, Session, tool

from conftest import Published, error_text, inp, make_tool


@tool(
    presentation_meta=lambda args, value: {"doubled": value * 2}, render=lambda a, v: f"value={v}"
)
def number(n: int) -> int:
    return n


async def run_with(listener, defn=number, arguments=None):
    session = Session(tools=[defn])
    session.on("tools/post-execute", listener)
    return await session.execute(inp(defn.name, {"n": 2} if arguments is None else arguments))


async def test_content_replacement_keeps_value_and_meta():
    result = await run_with(lambda e, r, n: Accept(content=[{"type": "text", "text": "redacted"}]))
    assert (result.value, result.meta, result.content) == (
        2,
        {"doubled": 4},
        ({"type": "text", "text": "redacted"},),
    )


async def test_value_replacement_recomputes_content_and_meta():
    result = await run_with(lambda e, r, n: Accept(value=7))
    assert (result.value, result.meta, result.content) == (
        7,
        {"doubled": 14},
        ({"type": "text", "text": "value=7"},),
    )


async def test_value_replacement_is_revalidated_against_the_output_schema():
    session = Session(tools=[number])
    published = Published(session)
    session.on("tools/post-execute", lambda e, r, n: Accept(value="seven"))
    result = await session.execute(inp("number", {"n": 2}))
    assert result.error.message == 'tool "number" returned invalid output: value must be an integer'
    assert result.error.code == "INVALID_TOOL_OUTPUT"
    assert published.results == [result]


async def test_replacing_both_content_and_value_fails():
    result = await run_with(lambda e, r, n: Accept(content="x", value=1))
    assert result.content == error_text(
        "a tools/post-execute decision may replace the content or the value, not both"
    )
    assert result.value is msgspec.UNSET


@tool
def failing(n: int) -> int:
    raise ValueError("no")


async def test_value_replacement_on_a_failure_fails():
    result = await run_with(lambda e, r, n: Accept(value=1), defn=failing)
    assert result.error.message == "tools/post-execute cannot replace the value of a failed result"
    assert result.error.code == "HOOK_FAILED"           # the listener's fault, not the tool's


async def test_block_yields_a_valueless_failure_with_exactly_the_feedback():
    feedback = [{"type": "text", "text": "too large"}, {"type": "image", "data": "AAAA"}]
    result = await run_with(lambda e, r, n: Block(feedback, additional_contexts=["see policy"]))
    assert result.is_error and result.denied
    assert result.content == tuple(feedback)
    assert result.error.message == "too large\n[image]"
    assert result.meta is None and result.additional_contexts == ("see policy",)
    assert result.concludes_turn is False


async def test_block_with_empty_feedback_has_a_default_message():
    result = await run_with(lambda e, r, n: Block([]))
    assert result.error.message == "blocked by tools/post-execute policy"


async def test_a_non_json_post_result_becomes_a_safe_error():
    result = await run_with(
        lambda e, r, n: Accept(content=[{"type": "text", "text": float("nan")}])
    )
    assert result.is_error
    assert (
        result.error.message
        == ("replacement content must be losslessly JSON-serializable: non-finite number at "
            "$[0].text")
    )


async def test_an_invalid_decision_fails_on_the_final_route():
    result = await run_with(lambda e, r, n: "ok")
    assert result.error.message == "tools/post-execute returned an invalid decision (str)"


async def test_the_tool_disappearing_before_a_value_replacement_fails_cleanly():
    session = Session()
    dispose = session.register(number)

    async def listener(execution, result, next):
        dispose()
        return Accept(value=3)

    session.on("tools/post-execute", listener)
    result = await session.execute(inp("number", {"n": 1}))
    assert result.error.message == 'unknown tool "number"'
    assert result.error.code == "UNKNOWN_TOOL"


@pytest.mark.parametrize(
    "decision",
    [
        Accept(),
        Accept(content="fine"),
        Accept(value=1),
        Accept(additional_contexts=["x"]),
    ],
    ids=["accept", "content", "value", "contexts"],
)
async def test_a_denial_cannot_be_turned_into_success_by_any_decision(decision):
    session = Session(tools=[number])
    session.on("tools/pre-execute", lambda e, n: Deny("denied"))
    seen = []

    def listener(execution, result, next):
        seen.append(result.error.message)
        return decision

    session.on("tools/post-execute", listener)
    result = await session.execute(inp("number", {"n": 1}))
    assert result.is_error and seen == ["denied"]


async def test_post_execute_sees_thrown_and_unknown_tool_failures():
    seen = []
    session = Session(tools=[make_tool("bad", execute=lambda a, c: 1 / 0)])
    session.on("tools/post-execute", lambda e, r, n: seen.append(r.error.message) or n())
    await session.execute(inp("bad"))
    await session.execute(inp("missing"))
    assert seen == ["division by zero", 'unknown tool "missing"']


async def test_a_post_execute_listener_throw_keeps_its_typed_code():
    from codemode.pipeline import HarnessError

    class Spill(HarnessError):
        code = "SPILL_FAILED"

    def listener(execution, result, next):
        raise Spill("spill store full")

    result = await run_with(listener)
    assert result.content == error_text("spill store full")
    assert result.error.code == "SPILL_FAILED"


async def test_plain_accept_appends_contexts_and_keeps_concludes_turn():
    async def body(args, ctx):
        ctx.conclude_turn()
        ctx.defer_context("from body")
        return 1

    defn = make_tool("fin", body)
    session = Session(tools=[defn])
    session.on("tools/post-execute", lambda e, r, n: Accept(additional_contexts=["from post"]))
    result = await session.execute(inp("fin"))
    assert result.concludes_turn is True
    assert result.additional_contexts == ("from body", "from post")
