"""@tool, output validation, meta, model schemas, presenters (docs/pipeline-spec.md §1.6, S8,
S2/S16)."""

import threading
from typing import Literal

import msgspec
import pytest

from codemode.pipeline import RunContext, Session, ToolDefinition, message_of, tool

from conftest import error_text, inp, make_tool


class Point(msgspec.Struct):
    x: int
    y: int


@tool(timeout_ms=500, concurrency_safe=True,
      present_call=lambda args: {"title": f"read {args['path']}"},
      present_result=lambda args, r: {"lines": len(r["content"]), "failed": r["isError"]})
def read_file(path: str, mode: Literal["a", "b"] = "a", limit: int | None = None) -> str:
    """Read a file.

    Args:
        path: file to read
        mode: read mode
    """
    return f"{path}:{mode}:{limit}"


async def test_schemas_sent_to_the_model_never_include_callbacks_timeout_or_concurrency():
    session = Session(tools=[read_file])
    [schema] = session.model_tools()
    assert set(schema) == {"name", "description", "parameters"}
    assert schema["description"] == "Read a file."
    encoded = msgspec.json.encode(schema).decode()
    for leak in ("timeout", "500", "concurrency", "present", "finalize"):
        assert leak not in encoded
    assert schema["parameters"] == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "file to read"},
            "mode": {"enum": ["a", "b"], "default": "a", "description": "read mode"},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        },
        "required": ["path"],
    }


async def test_bad_arguments_fail_invalid_args_with_the_violation_list():
    session = Session(tools=[read_file])
    result = await session.execute(inp("read_file", {"mode": "c", "limit": "ten"}))
    message = (
        'invalid arguments: missing required property "path"; "mode" must be one of ["a","b"]; '
        '"limit" must be an integer or null'
    )
    assert result.content == error_text(message)
    assert (result.error.info.name, result.error.code) == ("InvalidArgumentsError", "INVALID_ARGS")


async def test_extra_keys_are_allowed_on_an_open_root_and_refused_when_strict():
    @tool(strict=True)
    def closed(path: str) -> str:
        return path

    session = Session(tools=[read_file, closed])
    assert (await session.execute(inp("read_file", {"path": "p", "extra": 1}))).value == "p:a:None"
    result = await session.execute(inp("closed", {"path": "p", "extra": 1}))
    assert (
        result.error.message
        == 'invalid arguments: "extra" is not a declared property (additionalProperties: false)'
    )


async def test_nested_struct_arguments_are_validated_with_paths_and_converted():
    @tool
    def centroid(points: list[Point]) -> dict:
        return {"x": sum(p.x for p in points) / len(points)}

    session = Session(tools=[centroid])
    ok = await session.execute(inp("centroid", {"points": [{"x": 1, "y": 0}, {"x": 3, "y": 0}]}))
    assert ok.value == {"x": 2.0}
    bad = await session.execute(inp("centroid", {"points": [{"x": 1}, {"x": "2", "y": 0}]}))
    assert (
        bad.error.message
        == ('invalid arguments: missing required property "points[0].y"; "points[1].x" must be an '
            'integer')
    )


async def test_sync_tools_run_in_a_worker_thread_and_async_tools_on_the_loop():
    threads = {}

    @tool
    def sync_tool() -> str:
        threads["sync"] = threading.get_ident()
        return "s"

    @tool
    async def async_tool(ctx: RunContext) -> str:
        threads["async"] = threading.get_ident()
        return ctx.execution.call_id

    session = Session(tools=[sync_tool, async_tool])
    assert (await session.execute(inp("sync_tool"))).value == "s"
    assert (await session.execute(inp("async_tool", call_id="c5"))).value == "c5"
    assert threads["async"] == threading.get_ident() != threads["sync"]


async def test_a_sync_tool_declared_non_blocking_runs_on_the_loop_through_every_stage():
    threads, stages = {}, []

    @tool(blocking=False)
    def quick(a: int) -> int:
        threads["quick"] = threading.get_ident()
        if a < 0:
            raise ValueError("negative")
        return a + 1

    session = Session(tools=[quick])
    for point in ("tools/pre-execute", "tools/execute", "tools/post-execute"):
        session.on(point, lambda *args, point=point: (stages.append(point), args[-1]())[1])
    session.on("tools/result", lambda execution, result: stages.append("tools/result"))
    assert (await session.execute(inp("quick", {"a": 1}))).value == 2
    assert threads["quick"] == threading.get_ident()
    assert stages == ["tools/pre-execute", "tools/execute", "tools/post-execute",
                      "tools/result"]
    failed = await session.execute(inp("quick", {"a": -1}, call_id="c2"))
    assert failed.is_error and failed.error.message == "negative"
    bad = await session.execute(inp("quick", {"a": "x"}, call_id="c3"))
    assert bad.is_error and bad.error.message.startswith("invalid arguments")


async def test_a_struct_return_value_is_converted_and_validated():
    @tool
    def origin() -> Point:
        return Point(0, 0)

    @tool
    def liar() -> Point:
        return {"x": "zero"}  # type: ignore[return-value]

    session = Session(tools=[origin, liar])
    assert (await session.execute(inp("origin"))).value == {"x": 0, "y": 0}
    result = await session.execute(inp("liar"))
    assert result.content == error_text(
        'tool "liar" returned invalid output: missing required property "y"; "x" must be an integer'
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (float("nan"), "value must be losslessly JSON-serializable: non-finite number at $"),
        (
            {"when": object()},
            "value must be losslessly JSON-serializable: unsupported type object at $.when",
        ),
        ((1, 2), "value must be losslessly JSON-serializable: unsupported type tuple at $"),
    ],
)
async def test_a_non_json_body_value_is_invalid_tool_output_before_post_execute(value, problem):
    session = Session(tools=[make_tool("t", lambda a, c: value)])
    seen = []
    session.on("tools/post-execute", lambda e, r, n: seen.append(r.error.code) or n())
    result = await session.execute(inp("t"))
    assert result.error.message == f'tool "t" returned invalid output: {problem}'
    assert seen == ["INVALID_TOOL_OUTPUT"]


async def test_render_and_meta_failures_are_invalid_tool_output():
    def bad_render(args, value):
        raise KeyError("k")

    session = Session(tools=[
        make_tool("r", lambda a, c: 1, render=bad_render),
        make_tool("m", lambda a, c: 1, presentation_meta=lambda a, v: {"x": {1}}),
        make_tool("c", lambda a, c: 1, render=lambda a, v: [{"no": "type"}]),
    ])
    assert (
        await session.execute(inp("r"))
    ).error.message == "tool \"r\" returned invalid output: render raised: KeyError: 'k'"
    assert (await session.execute(inp("m"))).error.message == (
        'tool "m" returned invalid output: presentation meta must be losslessly JSON-serializable: '
        "unsupported type set at $.x")
    assert (await session.execute(inp("c"))).error.message == (
        'tool "c" returned invalid output: rendered content[0] must be a content block with a '
        'string "type"'
    )


async def test_meta_is_computed_from_the_canonical_value_and_only_for_top_level_calls():
    seen = []

    def meta(args, value):
        seen.append(value)
        return {"size": len(value)}

    session = Session(tools=[make_tool("t", lambda a, c: ["a", "b"], presentation_meta=meta),
                             make_tool("plain", lambda a, c: 1)])
    top = await session.execute(inp("t"))
    nested = await session.execute(inp("t", parent=object()))
    plain = await session.execute(inp("plain"))
    assert (top.meta, nested.meta, plain.meta) == ({"size": 2}, None, None)
    assert seen == [["a", "b"]]


async def test_presenters_validate_softly_and_never_raise_on_replayed_arguments():
    session = Session(tools=[read_file])
    assert session.present_call("read_file", {"path": "/etc/hosts"}) == {"title": "read /etc/hosts"}
    for junk in ({}, {"path": 3}, "raw text", None, [1]):
        assert session.present_call("read_file", junk) is None
        assert (
            session.present_result(
                "read_file", junk, {"content": [], "isError": False, "meta": None}
            )
            is None
        )
    result = await session.execute(inp("read_file", {"path": "p"}))
    assert session.present_result("read_file", {"path": "p"}, result) == {
        "lines": 1,
        "failed": False,
    }
    assert session.present_call("unknown", {}) is None


async def test_a_raw_presenter_that_raises_falls_back_to_the_generic_card():
    session = Session(tools=[make_tool("t", present_call=lambda args: 1 / 0)])
    assert session.present_call("t", {}) is None


def test_tool_definition_rejects_malformed_declarations():
    with pytest.raises(ValueError):
        make_tool("")
    with pytest.raises(ValueError):
        make_tool("t", timeout_ms=0)
    with pytest.raises(TypeError):
        ToolDefinition(name="t", description="d", parameters=[], execute=lambda a, c: 1)  # type: ignore[arg-type]


class Hostile:
    def __getattribute__(self, name):
        raise RuntimeError("no attribute access")

    def __str__(self):
        raise RuntimeError("no str")


class HostileError(Exception):
    def __str__(self):
        raise RuntimeError("no str")


@pytest.mark.parametrize(
    ("thrown", "message"),
    [
        (ValueError("plain"), "plain"),
        ({"message": "from a mapping"}, "from a mapping"),
        ("a string", "a string"),
        (42, "42"),
        (Hostile(), "<unprintable error>"),
        (HostileError(), "HostileError"),
        (ValueError(), "ValueError"),
        (KeyError("x"), "KeyError: 'x'"),
        (KeyError(), "KeyError"),
    ],
    ids=[
        "exception",
        "mapping",
        "string",
        "int",
        "hostile-object",
        "hostile-exception",
        "empty-exception",
        "key-error-names-its-class",
        "empty-key-error",
    ],
)
def test_message_extraction_never_raises(thrown, message):
    assert message_of(thrown) == message


async def test_a_hostile_exception_still_normalizes():
    def body(args, ctx):
        raise HostileError()

    session = Session(tools=[make_tool("t", body)])
    result = await session.execute(inp("t"))
    assert result.content == error_text("HostileError")


async def test_a_tool_raising_key_error_reads_clearly():
    def lookup(args, ctx):
        return {}["x"]

    session = Session(tools=[make_tool("lookup", lookup)])
    result = await session.execute(inp("lookup"))
    assert result.error.message == "KeyError: 'x'"
    assert result.content == error_text("KeyError: 'x'")


async def test_a_value_msgspec_refuses_is_still_judged_by_the_output_schema():
    import datetime

    @tool
    def when() -> datetime.datetime:             # schema: a string, format "date-time"
        return "whenever"  # type: ignore[return-value]

    @tool
    def flag_as_number() -> float:
        return True  # type: ignore[return-value]

    session = Session(tools=[when, flag_as_number])
    assert when.output_fits is not None and not when.output_fits("whenever")
    assert (await session.execute(inp("when"))).value == "whenever"  # the schema accepts it
    result = await session.execute(inp("flag_as_number"))
    assert result.error.message == (
        'tool "flag_as_number" returned invalid output: value must be a number')


@pytest.mark.parametrize("value", ["text", "", 6.0, None, [1, {"é": "ü"}], {"a": [True, None]}])
def test_the_default_content_is_the_default_render_frozen(value):
    from codemode.pipeline._content import default_content, default_render, freeze_blocks
    from codemode.pipeline._lossless import FrozenDict, snapshot

    frozen = snapshot(value)
    made = default_content(frozen)
    assert made == freeze_blocks(default_render(frozen))
    assert [type(block) for block in made] == [FrozenDict]


@pytest.mark.parametrize("value", [7, -2**63, 1e16, 0.1, True, False, None, (1, 2), [1, [2]],
                                   {"a": {"b": 1}}])
def test_the_default_render_is_the_json_of_the_value_with_containers_indented(value):
    """A scalar's text is its JSON as it is; a container's (a tuple too) is indented by 2."""
    import msgspec

    from codemode.pipeline import default_render

    expected = msgspec.json.format(msgspec.json.encode(value), indent=2).decode()
    assert default_render(value) == [{"type": "text", "text": expected}]
