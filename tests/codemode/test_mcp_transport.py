"""The MCP transport against a real server process that answers with hostile bytes
(`fixtures/mcp_hostile_server.py`): nothing it sends leaves a call waiting for its timeout,
a broken answer fails the call it answers at once naming the server, the server's own
JSON-RPC errors are classified by code, and the connection survives all of it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import pytest_asyncio

from codemode._mcp import (
    McpCallTimeout,
    McpProtocolError,
    McpServer,
    McpStartError,
    McpToolError,
)

pytestmark = [pytest.mark.mcp, pytest.mark.asyncio(loop_scope="module")]

HOSTILE = (sys.executable, str(Path(__file__).resolve().parents[2] / "fixtures"
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
    ("bad_utf8_outside", {}, parse_error("Invalid JSON: key must be a string at line 1 "
                                         "column 26")),
])
async def test_an_answer_that_cannot_be_parsed_fails_its_call_at_once(
        hostile, tool, arguments, message):
    with pytest.raises(McpProtocolError) as caught:
        await hostile.call(tool, arguments, timeout_s=WAIT_S)
    assert (caught.value.code, caught.value.server, caught.value.message) == (
        "MCP_PROTOCOL_ERROR", "hostile", message)
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
