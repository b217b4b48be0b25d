"""`codemode.adapters.openai` against the OpenAI SDK's own types and client (the client
talks to a canned transport, never the network)."""

from __future__ import annotations

import json

import pytest

openai = pytest.importorskip(
    "openai", reason="the OpenAI SDK is not installed: pip install -e '.[openai]'")

from openai.types.chat import (  # noqa: E402
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionToolMessageParam,
)
from openai.types.responses import FunctionToolParam, ResponseFunctionToolCall  # noqa: E402
from openai.types.responses.response_input_param import FunctionCallOutput  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402

from codemode.adapters.openai import (  # noqa: E402
    chat_completion_tools,
    function_call_outputs,
    responses_tools,
    tool_messages,
)
from tests.codemode.adapters.adapter_helpers import (  # noqa: E402
    FAILING_PROGRAM,
    ORDERS_PROGRAM,
    ORDERS_TEXT,
    CannedApi,
    code_mode_session,
)


def _completion(message: dict) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-test",
            "choices": [{"index": 0, "finish_reason": "tool_calls" if "tool_calls" in message
                         else "stop", "message": {"role": "assistant", **message}}]}


def _tool_call(call_id: str, code: str) -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": "run_code", "arguments": json.dumps({"code": code})}}


def test_chat_completion_tools_are_the_sdks_tool_params():
    session = code_mode_session()
    tools = chat_completion_tools(session)
    assert [t["function"]["name"] for t in tools] == ["run_code"]
    adapter = TypeAdapter(ChatCompletionFunctionToolParam)
    assert [adapter.validate_python(t) for t in tools] == tools
    assert "def list_orders(customer: str) -> list[str]" in tools[0]["function"]["description"]


async def test_a_chat_completion_round_trip_runs_the_program():
    session = code_mode_session()
    api = CannedApi(
        _completion({"content": None, "tool_calls": [_tool_call("call_1", ORDERS_PROGRAM),
                                                     _tool_call("call_2", FAILING_PROGRAM)]}),
        _completion({"content": "Ada spent 170.75."}))
    client = openai.AsyncOpenAI(api_key="test", base_url="http://api.test/v1",
                                http_client=api.client(), max_retries=0)
    messages: list = [{"role": "user", "content": "How much did Ada spend?"}]
    tools = chat_completion_tools(session)
    completion = await client.chat.completions.create(model="gpt-test", messages=messages,
                                                      tools=tools)
    message = completion.choices[0].message
    assert all(isinstance(c, ChatCompletionMessageFunctionToolCall) for c in message.tool_calls)

    answers = await tool_messages(session, message.tool_calls)
    adapter = TypeAdapter(ChatCompletionToolMessageParam)
    assert [adapter.validate_python(a) for a in answers] == answers
    assert answers[0] == {"role": "tool", "tool_call_id": "call_1", "content": ORDERS_TEXT}
    assert answers[1]["tool_call_id"] == "call_2"
    assert answers[1]["content"].startswith("Error: code run failed (exception): ")

    messages += [message.model_dump(exclude_none=True), *answers]
    final = await client.chat.completions.create(model="gpt-test", messages=messages, tools=tools)
    assert final.choices[0].message.content == "Ada spent 170.75."
    first, second = api.requests
    assert first["tools"] == tools
    assert second["messages"][-2:] == answers


async def test_a_responses_round_trip_runs_the_program():
    session = code_mode_session()
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "run_code",
            "arguments": json.dumps({"code": ORDERS_PROGRAM}), "status": "completed"}
    response = {"id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-test",
                "status": "completed", "output": [call], "parallel_tool_calls": True,
                "tool_choice": "auto", "tools": []}
    api = CannedApi(response)
    client = openai.AsyncOpenAI(api_key="test", base_url="http://api.test/v1",
                                http_client=api.client(), max_retries=0)
    tools = responses_tools(session)
    adapter = TypeAdapter(FunctionToolParam)
    assert [adapter.validate_python(t) for t in tools] == tools

    result = await client.responses.create(model="gpt-test", input="How much did Ada spend?",
                                           tools=tools)
    assert isinstance(result.output[0], ResponseFunctionToolCall)
    outputs = await function_call_outputs(session, result.output)
    assert [TypeAdapter(FunctionCallOutput).validate_python(o) for o in outputs] == outputs
    assert outputs == [{"type": "function_call_output", "call_id": "call_1",
                        "output": ORDERS_TEXT}]
    assert api.requests[0]["tools"] == tools
