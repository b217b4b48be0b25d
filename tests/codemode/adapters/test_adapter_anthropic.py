"""`codemode.adapters.anthropic` against the Anthropic SDK's own types and client (the
client talks to a canned transport, never the network)."""

from __future__ import annotations

import pytest

anthropic = pytest.importorskip(
    "anthropic", reason="the Anthropic SDK is not installed: pip install -e '.[anthropic]'")

from anthropic.types import ToolParam, ToolResultBlockParam, ToolUseBlock  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402

from codemode.adapters.anthropic import tool_results, tools  # noqa: E402
from tests.codemode.adapters.adapter_helpers import (  # noqa: E402
    FAILING_PROGRAM,
    ORDERS_PROGRAM,
    ORDERS_TEXT,
    CannedApi,
    code_mode_session,
)


def _message(content: list[dict], stop_reason: str) -> dict:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": content, "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1}}


def test_tools_are_the_sdks_tool_params():
    definitions = tools(code_mode_session())
    assert [t["name"] for t in definitions] == ["run_code"]
    adapter = TypeAdapter(ToolParam)
    assert [adapter.validate_python(t) for t in definitions] == definitions
    assert definitions[0]["input_schema"]["required"] == ["code"]


async def test_tool_use_blocks_become_tool_results_with_is_error():
    session = code_mode_session()
    api = CannedApi(
        _message([{"type": "text", "text": "Let me add it up."},
                  {"type": "tool_use", "id": "toolu_1", "name": "run_code",
                   "input": {"code": ORDERS_PROGRAM}},
                  {"type": "tool_use", "id": "toolu_2", "name": "run_code",
                   "input": {"code": FAILING_PROGRAM}}], "tool_use"),
        _message([{"type": "text", "text": "Ada spent 170.75."}], "end_turn"))
    client = anthropic.AsyncAnthropic(api_key="test", base_url="http://api.test",
                                      http_client=api.client(), max_retries=0)
    definitions = tools(session)
    messages: list = [{"role": "user", "content": "How much did Ada spend?"}]
    message = await client.messages.create(model="claude-test", max_tokens=100,
                                           messages=messages, tools=definitions)
    assert [type(b) for b in message.content[1:]] == [ToolUseBlock, ToolUseBlock]

    results = await tool_results(session, message.content)
    adapter = TypeAdapter(ToolResultBlockParam)
    assert [adapter.validate_python(r) for r in results] == results
    assert results[0] == {"type": "tool_result", "tool_use_id": "toolu_1",
                          "content": ORDERS_TEXT, "is_error": False}
    assert results[1]["tool_use_id"] == "toolu_2" and results[1]["is_error"] is True
    assert results[1]["content"].startswith("Error: code run failed (exception): ")

    messages += [{"role": "assistant", "content": message.content},
                 {"role": "user", "content": results}]
    final = await client.messages.create(model="claude-test", max_tokens=100,
                                         messages=messages, tools=definitions)
    assert final.content[0].text == "Ada spent 170.75."
    first, second = api.requests
    assert first["tools"] == definitions
    assert second["messages"][-1] == {"role": "user", "content": results}
    assert second["messages"][-2]["content"][1]["id"] == "toolu_1"
