"""One argument check for every tool, and Python's call rules in the stubs (issue 17, items 1-3).

The same tool twice, once native (`@tool`) and once on a real MCP server process: every
malformed call, through every route a program has (plain call, `**{...}`, `call_tool`,
`tools.x`) and as a direct call, fails the same way — `INVALID_ARGS`, the same message, before
policy, logged once."""

from __future__ import annotations

import sys
import textwrap
from typing import Annotated, Literal

import msgspec
import pytest
import pytest_asyncio
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode import CodeMode, Session, events, tool
from codemode._mcp.client import McpServer
from codemode.pipeline import ToolDefinition

pytestmark = [pytest.mark.mcp, pytest.mark.asyncio(loop_scope="module")]


class Place(msgspec.Struct):
    city: str


@tool(name="book")
def native_book(name: Annotated[str, msgspec.Meta(max_length=8)], kind: Literal["a", "b"],
                count: int, place: Place, tag: str, note: str | None = None) -> str:
    """Book a place."""
    return f"{name}:{kind}:{count}:{place.city}:{tag}:{note}"


SERVER = textwrap.dedent('''
    from typing import Annotated, Literal
    from pydantic import BaseModel, Field
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("booking")

    class Place(BaseModel):
        city: str

    @server.tool(structured_output=False)
    def book(name: Annotated[str, Field(max_length=8)], kind: Literal["a", "b"], count: int,
             place: Place, tag: str, note: str | None = None) -> str:
        """Book a place."""
        return f"{name}:{kind}:{count}:{place.city}:{tag}:{note}"

    server.run()
''')

GOOD = {"name": "ok", "kind": "a", "count": 1, "place": {"city": "Oslo"}, "tag": "t"}

# (case, arguments, the message after "invalid arguments: ") for calls whose shape fits the
# Python signature: the host's schema check answers them.
SCHEMA_CASES = [
    ("wrong type", {**GOOD, "count": "1"}, '"count" must be an integer'),
    ("out of enum", {**GOOD, "kind": "c"}, '"kind" must be one of ["a","b"]'),
    ("too long", {**GOOD, "name": "x" * 9}, '"name" must be at most 8 characters long'),
    ("nested wrong", {**GOOD, "place": {"city": 3}}, '"place.city" must be a string'),
    ("null, not nullable", {**GOOD, "tag": None}, '"tag" must be a string'),
]
# Keywords the signature does not have: Python's own TypeError text, from the guest.
MISSING = {k: v for k, v in GOOD.items() if k != "tag"}
SHAPE_CASES = [
    ("missing", MISSING, "book() missing 1 required positional argument: 'tag'"),
    ("extra", {**GOOD, "extra": 1}, "book() got an unexpected keyword argument 'extra'"),
    ("misspelt", {**GOOD, "nme": "x"},
     "book() got an unexpected keyword argument 'nme'. Did you mean 'name'?"),
]


@pytest.fixture(scope="module")
def server_script(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    path = tmp_path_factory.mktemp("booking") / "booking_server.py"
    path.write_text(SERVER, encoding="utf-8")
    return [sys.executable, str(path)]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def booking(server_script):
    async with await McpServer.connect(server_script, name="booking") as server:
        yield server


def session_for(route: str, booking: McpServer, tmp_path) -> Session:
    tools = [native_book] if route == "native" else \
        [d for d in booking.definitions if d.name == "book"]
    session = Session(tools=tools, log=str(tmp_path / f"{route}.jsonl"))
    return session


def of(session: Session, kind: type) -> list:
    return [e for e in session.log.read() if isinstance(e, kind)]


ROUTES = ("plain", "splat", "call_tool", "tools")


def call_text(route: str, kw: dict) -> str:
    """The call as a program writes it on `route`."""
    keywords = ", ".join(f"{k}={v!r}" for k, v in kw.items())
    return {"plain": f"book({keywords})", "splat": f"book(**{kw!r})",
            "call_tool": f"call_tool('book', **{kw!r})", "tools": f"tools.book({keywords})"}[route]


def program(cases: list[tuple[str, dict]]) -> str:
    lines = ["out = []"]
    for route, kw in cases:
        lines += ["try:", f"    out.append({call_text(route, kw)})",
                  "except ToolArgumentError as e:",
                  "    out.append([type(e).__name__, isinstance(e, TypeError), e.code, e.message,",
                  "                e.__context__ is None and e.__cause__ is None])"]
    return "\n".join([*lines, "out"])


@pytest.mark.parametrize("tool_kind", ["native", "mcp"])
async def test_every_malformed_call_through_every_route_is_invalid_args_logged_once(
    booking, tmp_path, tool_kind
):
    session = session_for(tool_kind, booking, tmp_path)
    seen: list[str] = []
    session.on("tools/pre-execute", lambda e, n: (seen.append(e.name), n())[1])
    CodeMode(session, type_check="off")      # the run-time check of malformed calls
    cases = [(route, kw) for _, kw, _ in (*SCHEMA_CASES, *SHAPE_CASES) for route in ROUTES]
    result = await session.call("run_code", {"code": program(cases)})
    assert not result.is_error, result.text
    expected = [["ToolArgumentError", True, "INVALID_ARGS", f"invalid arguments: {why}", True]
                for _, _, why in (*SCHEMA_CASES, *SHAPE_CASES) for _ in ROUTES]
    assert result.value["result"] == expected
    assert seen == ["run_code"]                       # policy never judged a malformed call
    starts, settles = of(session, events.CodeDispatchStart), of(session, events.CodeDispatch)
    assert [s.arguments for s in starts] == [s.arguments for s in settles] == \
        [kw for _, kw in cases]
    assert [(s.is_error, s.code) for s in settles] == [(True, "INVALID_ARGS")] * len(cases)
    session.close()


@pytest.mark.parametrize("tool_kind", ["native", "mcp"])
async def test_direct_calls_get_the_same_schema_answer_before_policy(booking, tmp_path, tool_kind):
    session = session_for(tool_kind, booking, tmp_path)
    seen: list[str] = []
    session.on("tools/pre-execute", lambda e, n: (seen.append(e.name), n())[1])
    direct = [*SCHEMA_CASES, ("missing", MISSING, 'missing required property "tag"')]
    for _, kw, why in direct:
        result = await session.call("book", kw)
        assert (result.error.code, result.error.message) == (
            "INVALID_ARGS", f"invalid arguments: {why}")
    assert seen == []
    assert len(of(session, events.ToolCall)) == len(of(session, events.ToolResult)) \
        == len(direct)
    ok = await session.call("book", GOOD)
    assert ok.value == "ok:a:1:Oslo:t:None" and seen == ["book"]
    session.close()


async def test_a_wrong_keyword_alone_is_named_not_reported_as_missing(booking, tmp_path):
    session = session_for("mcp", booking, tmp_path)
    CodeMode(session, type_check="off")      # what the run meets
    code = ("try:\n    book(tz='UTC')\nexcept TypeError as e:\n    r = e.message\nr")
    result = await session.call("run_code", {"code": code})
    assert result.value["result"] == (
        "invalid arguments: book() got an unexpected keyword argument 'tz'")
    session.close()


async def test_the_traceback_of_a_bad_call_has_no_chained_binding_error(tmp_path):
    session = Session(tools=[native_book], log=str(tmp_path / "s.jsonl"))
    CodeMode(session, type_check="off")      # what the run meets
    result = await session.call("run_code", {"code": "book(nme='x')"})
    assert result.is_error
    assert "During handling" not in result.text and "Binding" not in result.text
    assert "Did you mean 'name'?" in result.text
    session.close()


SELF_PROGRAM = """
out = [odd(self=1, cls=2), odd(**{"self": 1, "cls": 2, "from": 3, "a-b": 4}),
       call_tool("odd", self=1, cls=2), tools.odd(1, 2, **{"class": 5})]
out
"""


async def test_any_parameter_name_works_by_every_route(tmp_path):
    seen: list[dict] = []
    odd = ToolDefinition(
        name="odd", description="", execute=lambda args, ctx: (seen.append(dict(args)), "ok")[1],
        parameters={"type": "object", "properties": {
            "self": {"type": "integer"}, "cls": {"type": "integer"}, "from": {"type": "integer"},
            "a-b": {"type": "integer"}, "class": {"type": "integer"}},
            "required": ["self", "cls"]})
    session = Session(tools=[odd], log=str(tmp_path / "s.jsonl"))
    CodeMode(session)
    result = await session.call("run_code", {"code": SELF_PROGRAM})
    assert not result.is_error, result.text
    assert result.value["result"] == ["ok"] * 4
    assert seen == [{"self": 1, "cls": 2}, {"self": 1, "cls": 2, "from": 3, "a-b": 4},
                    {"self": 1, "cls": 2}, {"self": 1, "cls": 2, "class": 5}]
    session.close()


async def test_a_schema_that_asks_for_extra_keys_takes_them(tmp_path):
    seen: list[dict] = []
    open_tool = ToolDefinition(
        name="tagged", description="", execute=lambda args, ctx: (seen.append(dict(args)), 1)[1],
        parameters={"type": "object", "properties": {"a": {"type": "integer"}},
                    "additionalProperties": {"type": "integer"}})
    session = Session(tools=[open_tool], log=str(tmp_path / "s.jsonl"))
    CodeMode(session)
    code = ("try:\n    tagged(a=1, b='x')\nexcept TypeError as e:\n    r = e.message\n"
            "[tagged(a=1, b=2), r]")
    result = await session.call("run_code", {"code": code})
    assert result.value["result"] == [1, 'invalid arguments: "b" must be an integer']
    assert seen == [{"a": 1, "b": 2}]
    session.close()


async def test_a_schema_the_validator_cannot_read_is_refused_at_registration():
    with pytest.raises(ValueError) as raised:
        ToolDefinition(name="bad", description="", execute=lambda a, c: None,
                       parameters={"type": "object", "properties": {"n": {"type": "integr"}}})
    assert str(raised.value).startswith(
        "tool 'bad': parameters is not a valid JSON Schema: ")
    assert "(at properties.n.type)" in str(raised.value)
    with pytest.raises(ValueError, match=r"\$ref '#/\$defs/Gone' points nowhere"):
        ToolDefinition(name="bad", description="", execute=lambda a, c: None,
                       parameters={"type": "object", "properties": {"n": {"$ref": "#/$defs/Gone"}}})


# run_code's own arguments: the compiled check (`arguments_fit`) is the registry's fast path,
# true only for what RUN_CODE_PARAMETERS accepts; what it refuses, the validator explains.

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)
_RUN_CODE_ARGS = st.one_of(
    _JSON,
    st.dictionaries(st.sampled_from(["code", "description", "extra"]), _JSON, max_size=3),
    st.fixed_dictionaries({"code": st.text(max_size=8)},
                          optional={"description": st.text(max_size=8) | _JSON}),
)


@settings(max_examples=300, deadline=None)
@given(_RUN_CODE_ARGS)
async def test_run_codes_compiled_argument_check_agrees_with_its_schema(args: object) -> None:
    from codemode._run.run_code import RUN_CODE_PARAMETERS, _arguments_fit
    from codemode.pipeline._schema import argument_problem

    assert _arguments_fit(args) == (argument_problem(RUN_CODE_PARAMETERS, args) is None)


async def test_a_malformed_run_code_call_is_refused_with_the_schemas_message() -> None:
    session = Session()
    CodeMode(session)
    result = await session.call("run_code", {"code": "1", "description": 2})
    assert result.is_error and result.error is not None
    assert result.error.info is not None and result.error.info.code == "INVALID_ARGS"
    assert result.text == 'Error: invalid arguments: "description" must be a string'
    result = await session.call("run_code", {"code": "1", "x": 2})
    assert result.text == ('Error: invalid arguments: "x" is not a declared property '
                           "(additionalProperties: false)")
