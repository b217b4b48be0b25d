"""The MCP transport against a real server process that answers with hostile bytes
(`fixtures/mcp_hostile_server.py`): nothing it sends leaves a call waiting for its timeout,
a broken answer fails the call it answers at once naming the server, the server's own
JSON-RPC errors are classified by code, and the connection survives all of it."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode._mcp.client import (
    McpCallTimeout,
    McpError,
    McpProtocolError,
    McpServer,
    McpStartError,
    McpToolError,
)
from tests._fuzz import examples

pytestmark = [pytest.mark.mcp, pytest.mark.asyncio(loop_scope="module")]

HOSTILE = (sys.executable, str(Path(__file__).resolve().parents[3] / "fixtures"
                                / "mcp_hostile_server.py"))
#: long on purpose: each broken answer must fail at once, long before it
WAIT_S = 600


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def hostile():
    async with await McpServer.connect(HOSTILE, name="hostile", call_timeout_s=WAIT_S) as server:
        yield server


def parse_error(detail: str) -> str:
    return f"MCP server 'hostile' sent an answer that could not be parsed: {detail}"


@pytest.mark.parametrize(("tool", "arguments", "message"), [
    ("deep", {"depth": 1000}, parse_error("JSON nested too deeply to parse")),
    ("deep", {"depth": 100_000}, parse_error("JSON nested too deeply to parse")),
    ("wrong_version", {}, parse_error('its "jsonrpc" is "1.0", not "2.0"')),
    ("batch", {}, parse_error("a JSON-RPC batch (MCP sends one message per line)")),
    # the column follows the request's id, whose width depends on the calls made before
    ("bad_utf8_outside", {}, parse_error("Invalid JSON: key must be a string at line 1 "
                                         "column @COLUMN@")),
])
async def test_an_answer_that_cannot_be_parsed_fails_its_call_at_once(
        hostile, tool, arguments, message):
    with pytest.raises(McpProtocolError) as caught:
        await hostile.call(tool, arguments, timeout_s=WAIT_S)
    assert (caught.value.code, caught.value.server) == ("MCP_PROTOCOL_ERROR", "hostile")
    assert re.fullmatch(re.escape(message).replace("@COLUMN@", r"\d+"), caught.value.message)
    assert await hostile.call("echo", {"text": "still here"}) == "still here"


async def test_bytes_that_are_not_utf8_are_replaced_and_the_server_still_answers(hostile):
    assert await hostile.call("bad_utf8", timeout_s=WAIT_S) == "a\ufffd\ufffdb"
    assert await hostile.call("echo", {"text": "after"}) == "after"


async def test_a_nesting_the_parser_follows_is_delivered(hostile):
    value = await hostile.call("deep", {"depth": 50}, timeout_s=WAIT_S)
    depth = 0
    inner = value["v"]
    while inner:
        inner, depth = inner[0], depth + 1
    assert depth == 49


@pytest.mark.parametrize("code", [-32000, -32600, -32601, -32602, -32603, 1, 0])
async def test_a_json_rpc_error_from_a_live_server_is_its_error_not_a_death(hostile, code):
    with pytest.raises(McpToolError) as caught:
        await hostile.call("rpc_error", {"code": code}, timeout_s=WAIT_S)
    assert (caught.value.code, caught.value.message) == ("TOOL_ERROR", "the server says no")
    assert hostile.alive


async def test_a_json_rpc_request_timeout_code_is_a_timeout(hostile):
    with pytest.raises(McpCallTimeout) as caught:
        await hostile.call("rpc_error", {"code": -32001}, timeout_s=WAIT_S)
    assert caught.value.code == "TOOL_TIMEOUT"
    assert hostile.alive


async def test_a_json_rpc_parse_error_code_is_a_protocol_error(hostile):
    with pytest.raises(McpProtocolError, match="the server says no"):
        await hostile.call("rpc_error", {"code": -32700}, timeout_s=WAIT_S)


async def test_a_tool_listing_nested_too_deeply_fails_start_up_at_once():
    with pytest.raises(McpStartError) as caught:
        await McpServer.connect((*HOSTILE, "--deep-schema", "600"), name="hostile",
                                startup_timeout_s=WAIT_S)
    assert caught.value.code == "MCP_START_FAILED"
    assert caught.value.message.split("\n")[0].endswith(
        "failed: MCPError: " + parse_error("JSON nested too deeply to parse"))


async def test_a_broken_tool_listing_naming_no_id_fails_start_up_at_once():
    with pytest.raises(McpStartError) as caught:
        await McpServer.connect((*HOSTILE, "--anonymous-listing"), name="hostile",
                                startup_timeout_s=WAIT_S)
    assert caught.value.message.split("\n")[0].endswith(
        "failed: McpProtocolError: Invalid JSON: EOF while parsing a list at line 1 column 40")


# ---- any reply: property-based ------------------------------------------------------------

GOOD = {"jsonrpc": "2.0", "id": "@ID@", "result": {"content": [{"type": "text", "text": "x"}],
                                                   "isError": False}}
junk = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                 st.text(max_size=4), st.lists(st.integers(), max_size=2),
                 st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
edits = st.lists(st.one_of(
    st.tuples(st.just("set"), st.sampled_from(["jsonrpc", "result", "error"]), junk),
    # a method that is no name: a valid one would make the reply the server's own request
    st.tuples(st.just("set"), st.just("method"), junk.filter(lambda v: not isinstance(v, str))),
    st.tuples(st.just("drop"), st.sampled_from(["jsonrpc", "id", "result"])),
    st.tuples(st.just("error"), st.integers(-33000, 1000), st.text(max_size=8)),
    st.tuples(st.just("text"), st.sampled_from(["\ud835", "a\udc00", "\x00", "é" * 3])),
    st.tuples(st.just("deep"), st.integers(1, 3000)),
    st.tuples(st.just("batch")),
), max_size=3)
bytes_edits = st.lists(st.one_of(
    st.tuples(st.just("cut"), st.integers(0, 200)),
    st.tuples(st.just("bytes"), st.binary(min_size=1, max_size=3).filter(
        lambda b: b"\n" not in b)),
    st.tuples(st.just("tail"), st.sampled_from([b"}", b"]", b" garbage", b"\xff"])),
), max_size=2)


def reply_bytes(edit_list: list[Any], byte_list: list[Any]) -> bytes:
    """GOOD edited as JSON, then as bytes (never inside the id: a reply naming another call
    can only wait for its timeout)."""
    reply: Any = json.loads(json.dumps(GOOD))
    deep = 0
    for edit in edit_list:
        if edit[0] == "set" and isinstance(reply, dict):
            reply[edit[1]] = edit[2]
        elif edit[0] == "drop" and isinstance(reply, dict):
            reply.pop(edit[1], None)
        elif edit[0] == "error" and isinstance(reply, dict):
            reply.pop("result", None)
            reply["error"] = {"code": edit[1], "message": edit[2]}
        elif edit[0] == "text" and isinstance(reply, dict) and isinstance(reply.get("result"),
                                                                         dict):
            reply["result"]["content"] = [{"type": "text", "text": edit[1]}]
        elif edit[0] == "deep":
            deep = edit[1]
        elif edit[0] == "batch":
            reply = [reply]
    text = json.dumps(reply).replace('"@ID@"', "@ID@")
    if deep and '"isError": false' in text:
        text = text.replace('"isError": false', '"isError": false, "structuredContent": {"v": '
                            + "[" * deep + "]" * deep + "}", 1)
    data = text.encode("utf-8", "surrogatepass")
    after_id = data.find(b"@ID@") + 4 if b"@ID@" in data else 0
    for edit in byte_list:
        if edit[0] == "cut":
            data = data[: max(after_id + 1, edit[1] % (len(data) + 1))]
        elif edit[0] == "bytes":
            at = after_id + 1 + (len(edit[1]) % max(1, len(data) - after_id))
            data = data[:at] + edit[1] + data[at:]
        else:
            data += edit[1]
    return data


@settings(max_examples=examples(25), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(edit_list=edits, byte_list=bytes_edits)
async def test_any_reply_answers_its_call_at_once_and_the_server_goes_on(
        hostile, edit_list, byte_list):
    line = reply_bytes(edit_list, byte_list)
    try:
        await hostile.call("raw", {"hex": line.hex()}, timeout_s=5)
    except McpError as exc:
        assert not isinstance(exc, McpCallTimeout), (line, exc)
        assert exc.server == "hostile"
    assert await hostile.call("echo", {"text": "next"}, timeout_s=5) == "next", line
