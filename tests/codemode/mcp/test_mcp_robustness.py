"""MCP robustness as a kind (`codemode._mcp.client`), against real stdio server processes
(`fixtures/mcp_raw_server.py`, raw JSON-RPC; `fixtures/mcp_media_server.py`, the SDK's
server API): an answer that cannot be parsed never waits out the call timeout, and media
content reaches the model as content blocks, directly and from inside a program."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import pytest_asyncio

from codemode import CodeMode, Session, events
from codemode._mcp.client import McpCallTimeout, McpProtocolError, McpServer

pytestmark = [pytest.mark.mcp, pytest.mark.asyncio(loop_scope="module")]

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
RAW = (sys.executable, str(FIXTURES / "mcp_raw_server.py"))
MEDIA = (sys.executable, str(FIXTURES / "mcp_media_server.py"))
PNG = {"type": "image", "mimeType": "image/png"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def raw():
    # The timeout is long on purpose: a broken answer must fail at once, not after it.
    async with await McpServer.connect(RAW, name="raw", call_timeout_s=60) as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def media():
    async with await McpServer.connect(MEDIA, name="media") as server:
        yield server


async def timed(coro):
    started = time.monotonic()
    try:
        return await coro, time.monotonic() - started
    except Exception as exc:
        return exc, time.monotonic() - started


# ---- answers that cannot be parsed --------------------------------------------------------


async def test_an_unpaired_surrogate_escape_is_repaired_not_waited_on(raw):
    value, elapsed = await timed(raw.call("surrogate"))
    assert value == "math \ufffd bold"
    assert elapsed < 30


@pytest.mark.parametrize(
    "tool, detail",
    [
        (
            "garbled",
            "MCP server 'raw' sent an answer that could not be parsed: Invalid JSON: EOF while "
            "parsing a string at line 1 column ",
        ),
        (
            "wrong_shape",
            "MCP server 'raw' sent an answer that could not be parsed: valid JSON, but not "
            "a JSON-RPC message",
        ),
        (
            "anonymous",
            "MCP server 'raw' sent a message that could not be parsed while 'anonymous' was "
            "running: Invalid JSON: EOF while parsing a list at line 1 column 42",
        ),
    ],
)
async def test_an_answer_that_cannot_be_parsed_fails_the_call_at_once(raw, tool, detail):
    error, elapsed = await timed(raw.call(tool))
    assert isinstance(error, McpProtocolError), error
    assert (error.code, error.server) == ("MCP_PROTOCOL_ERROR", "raw")
    assert error.message.startswith(detail) and len(error.message) <= len(detail) + 4
    assert elapsed < 30
    assert await raw.call("echo", {"text": "still here"}) == "still here"


async def test_stray_output_on_stdout_is_ignored(raw):
    assert await raw.call("banner", {"text": "fine"}) == "fine"


async def test_a_server_that_never_answers_still_times_out(raw):
    error, _ = await timed(raw.call("silent", timeout_s=0.5))
    assert isinstance(error, McpCallTimeout)


async def test_a_broken_answer_is_a_typed_failure_through_the_pipeline_and_in_a_program(
    raw, tmp_path
):
    session = Session(tools=raw.definitions, log=str(tmp_path / "s.jsonl"), mode="both")
    CodeMode(session)
    direct = await session.call("garbled", {})
    assert direct.error.code == "MCP_PROTOCOL_ERROR"
    code = (
        "try:\n    garbled()\nexcept ToolCallError as e:\n    r = [e.code, e.message]\n"
        "[r, surrogate()]"
    )
    inside = await session.call("run_code", {"code": code})
    [code, message], value = inside.value["result"]
    assert code == "MCP_PROTOCOL_ERROR" and value == "math \ufffd bold"
    assert message.startswith("MCP server 'raw' sent an answer that could not be parsed: ")
    settles = [e for e in session.log.read() if isinstance(e, events.CodeDispatch)]
    assert [e.code for e in settles][:1] == ["MCP_PROTOCOL_ERROR"]
    session.close()


# ---- images, audio, resources ----------------------------------------------------------------


@pytest.mark.parametrize(
    "tool, arguments, kinds",
    [
        ("chart", {"title": "sales"}, ["text", "image"]),
        ("beep", {}, ["audio"]),
        ("readme", {}, ["resource"]),
    ],
)
async def test_media_from_a_direct_call_reaches_the_model_as_content_blocks(
    media, tool, arguments, kinds
):
    session = Session(tools=media.definitions)
    result = await session.call(tool, arguments)
    assert not result.is_error, result.text
    assert [b["type"] for b in result.content] == kinds
    assert result.content == tuple(result.value)  # the blocks, not JSON text of them
    if tool == "chart":
        assert {k: result.content[1][k] for k in PNG} == PNG
    if tool == "readme":
        assert result.content[0]["resource"]["text"] == "# Hello"


async def test_structured_content_beside_an_image_keeps_both(media):
    session = Session(tools=media.definitions)
    result = await session.call("measured", {})
    assert result.value == {"width": 1, "height": 1}
    [context] = result.additional_contexts
    assert [b["type"] for b in context] == ["image"]
    messages = [e for e in session.log.read() if isinstance(e, events.UserMessage)]
    assert [b["type"] for m in messages for b in m.message.content] == ["image"]


@pytest.mark.parametrize(
    "call, kinds",
    [
        ("chart(title='sales')", ["text", "image"]),
        ("beep()", ["audio"]),
        ("readme()", ["resource"]),
    ],
)
async def test_media_from_a_sub_call_follows_the_outer_result(media, tmp_path, call, kinds):
    session = Session(tools=media.definitions, log=str(tmp_path / "s.jsonl"))
    CodeMode(session)
    result = await session.call("run_code", {"code": f"v = {call}\nlen(v)"})
    assert not result.is_error, result.text
    log = session.log.read()
    [outer] = [e for e in log if isinstance(e, events.ToolResult)]
    [message] = [e for e in log if isinstance(e, events.UserMessage)]
    assert message.seq > outer.seq
    assert [b["type"] for b in message.message.content] == kinds
    session.close()


async def test_text_only_answers_are_unchanged(media):
    session = Session(tools=media.definitions)
    result = await session.call("plain", {"text": "hello"})
    assert (result.value, result.content) == ("hello", ({"type": "text", "text": "hello"},))
