"""MCP values unwrapped from the server SDK's `{"result": value}` envelope (issue 17, item 10),
against a real MCP SDK server process."""

from __future__ import annotations

import sys
import textwrap

import pytest
import pytest_asyncio

from codemode import CodeMode, Session
from codemode._mcp.client import McpServer
from codemode._mcp.values import admit_markers, lossless, wrapped_result
from codemode._run.stubs import build_stub
from codemode.pipeline import validate

pytestmark = [pytest.mark.mcp, pytest.mark.asyncio(loop_scope="module")]

SERVER = textwrap.dedent('''
    from pydantic import BaseModel
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("values")

    class Item(BaseModel):
        k: str

    class One(BaseModel):
        result: int

    @server.tool()
    def label(x: str) -> str:
        return f"A:{x}"

    @server.tool()
    def items() -> list[Item]:
        return [Item(k="a"), Item(k="b")]

    @server.tool()
    def one() -> One:
        """An object whose only field happens to be called result: not an envelope."""
        return One(result=3)

    @server.tool()
    def point() -> dict[str, int]:
        return {"x": 1}

    @server.tool(name="get-weather")
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    @server.tool(name="forecast")
    def five_days() -> list[int]:
        return [20, 21]

    class ForecastOutput(BaseModel):
        """Its title ends in Output, but it has two fields: not an envelope."""
        result: int
        unit: str

    @server.tool()
    def reading() -> ForecastOutput:
        return ForecastOutput(result=3, unit="C")

    class Record(BaseModel):
        id: int
        name: str
        sizes: list[int]

    @server.tool()
    def big() -> int:
        return 2**64 - 1

    @server.tool()
    def record() -> Record:
        return Record(id=2**64 - 1, name="n", sizes=[1, -(2**70)])

    server.run()
''')


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def values(tmp_path_factory):
    path = tmp_path_factory.mktemp("values") / "values_server.py"
    path.write_text(SERVER, encoding="utf-8")
    async with await McpServer.connect([sys.executable, str(path)], name="values") as server:
        yield server


def stub_return(definition) -> str:
    stub = build_stub(definition.name, "", definition.parameters, definition.output_schema)
    return stub.signature.rsplit("->", 1)[1].strip().rstrip(":")


async def test_the_program_sees_the_value_the_tool_returned(values, tmp_path):
    session = Session(tools=values.definitions, log=str(tmp_path / "s.jsonl"))
    CodeMode(session)
    code = "[label(x='x'), items(), one(), point()]"
    result = await session.call("run_code", {"code": code})
    assert not result.is_error, result.text
    assert result.value["result"] == ["A:x", [{"k": "a"}, {"k": "b"}], {"result": 3}, {"x": 1}]
    session.close()


async def test_a_direct_call_and_the_stub_see_the_inner_value_and_type(values, tmp_path):
    by_name = {d.name: d for d in values.definitions}
    assert stub_return(by_name["label"]) == "str"
    assert stub_return(by_name["items"]).startswith("list[")
    assert stub_return(by_name["one"]) == "OneResult"          # a TypedDict of {result: int}
    session = Session(tools=values.definitions)
    direct = await session.call("label", {"x": "y"})
    assert (direct.is_error, direct.value) == (False, "A:y")
    session.close()


async def test_a_tool_named_apart_from_its_function_is_unwrapped_too(values, tmp_path):
    # The SDK titles the envelope after the function ("get_weatherOutput"), not the tool.
    by_name = {d.name: d for d in values.definitions}
    assert (stub_return(by_name["get-weather"]), stub_return(by_name["forecast"])) == (
        "str", "list[int]")
    session = Session(tools=values.definitions, log=str(tmp_path / "s.jsonl"))
    direct = await session.call("get-weather", {"city": "Oslo"})
    assert (direct.is_error, direct.value) == (False, "sunny in Oslo")
    CodeMode(session)
    code = "[get_weather(city='Oslo'), forecast(), reading()]"
    result = await session.call("run_code", {"code": code})
    assert not result.is_error, result.text
    assert result.value["result"] == ["sunny in Oslo", [20, 21], {"result": 3, "unit": "C"}]
    session.close()


async def test_the_fastmcp_mark_unwraps_whatever_the_title():
    envelope = {"type": "object", "properties": {"result": {"type": "integer"}},
                "required": ["result"], "title": "Anything", "x-fastmcp-wrap-result": True}
    assert wrapped_result("t", envelope) == {"type": "integer"}
    assert wrapped_result("t", {**envelope, "x-fastmcp-wrap-result": False}) is None


BIG = str(2**64 - 1)


async def test_a_big_integer_keeps_the_rest_of_the_result(values, tmp_path):
    session = Session(tools=values.definitions, log=str(tmp_path / "s.jsonl"))
    big = await session.call("big", {})
    assert (big.is_error, big.value) == (False, {"$int": BIG})
    record = await session.call("record", {})
    assert not record.is_error, record.text
    assert record.value == {"id": {"$int": BIG}, "name": "n",
                            "sizes": [1, {"$int": str(-(2**70))}]}
    CodeMode(session)
    code = ("r = record()\n[r['name'], r['id'] == 2**64 - 1, r['sizes'] == [1, -2**70], "
            "type(big()) is int]")
    result = await session.call("run_code", {"code": code})
    assert result.value["result"] == ["n", True, True, True]
    by_name = {d.name: d for d in values.definitions}
    assert stub_return(by_name["big"]) == "int"           # the marker is not a type to expect
    session.close()


async def test_lossless_tags_what_json_cannot_carry_and_the_schema_admits_the_tags():
    assert lossless({"a": [2**63, -(2**63), float("nan"), -0.0, 1.5, True]}) == {
        "a": [{"$int": str(2**63)}, -(2**63), {"$float": "nan"}, {"$float": "-0.0"}, 1.5, True]}
    assert lossless(2**20000)["$int"].startswith("0x")
    schema = admit_markers({"type": "object", "properties": {"n": {"type": "integer"}},
                            "$defs": {"X": {"type": ["number", "null"]}}})
    assert validate(schema, {"n": {"$int": "1"}}) == []
    assert validate(schema, {"n": {"$other": "1"}}) != []
    assert validate(schema["$defs"]["X"], {"$float": "nan"}) == []
