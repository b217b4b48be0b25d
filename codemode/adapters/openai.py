"""The OpenAI SDK: tool definitions for Chat Completions and Responses, and the tool
messages that answer a response's tool calls (docs/integrations.md).

    tools = chat_completion_tools(session)              # [ChatCompletionFunctionToolParam]
    completion = client.chat.completions.create(model=..., messages=messages, tools=tools)
    message = completion.choices[0].message
    messages += [message, *await tool_messages(session, message.tool_calls or [])]

    tools = responses_tools(session)                    # [FunctionToolParam]
    response = client.responses.create(model=..., input=items, tools=tools)
    items += [*response.output, *await function_call_outputs(session, response.output)]

The definitions are the session's model-facing tools for `agent` (`Session.model_tools`:
`run_code` alone in code mode), as plain dicts of the SDK's param types. Tool calls may be
the SDK's objects or their dict forms; they run as one batch (`Session.call_batch`, one
step, the model's call ids and raw argument text), so every call goes through the
pipeline and the log. A failed call answers with its error text (Chat and Responses have
no error flag). The SDK itself is not imported.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from codemode.pipeline import Session, Signal, thaw

from ._common import field, result_text

__all__ = ["chat_completion_tools", "function_call_outputs", "responses_tools", "tool_messages"]


def chat_completion_tools(session: Session, *, agent: str | None = None) -> list[dict[str, Any]]:
    """`tools=` for `chat.completions.create`: one `ChatCompletionFunctionToolParam` per
    model-facing tool of the session (`{"type": "function", "function": {name, description,
    parameters}}`)."""
    return [{"type": "function",
             "function": {"name": t["name"], "description": t["description"],
                          "parameters": thaw(t["parameters"])}}
            for t in session.model_tools(agent)]


def responses_tools(session: Session, *, agent: str | None = None) -> list[dict[str, Any]]:
    """`tools=` for `responses.create`: one `FunctionToolParam` per model-facing tool
    (`strict` is False: `run_code`'s optional `description` is not strict-mode JSON Schema)."""
    return [{"type": "function", "name": t["name"], "description": t["description"],
             "parameters": thaw(t["parameters"]), "strict": False}
            for t in session.model_tools(agent)]


async def tool_messages(session: Session, tool_calls: Iterable[Any], *,
                        agent: str | None = None,
                        signal: Signal | None = None) -> list[dict[str, Any]]:
    """Run an assistant message's function tool calls; return one
    `ChatCompletionToolMessageParam` (`{"role": "tool", "tool_call_id", "content"}`) per call,
    in order. Calls of another type (custom tools) are skipped.

    Args:
        tool_calls: `ChatCompletionMessageFunctionToolCall`s (`message.tool_calls`) or dicts.
        agent: the calling agent (approval needs one).
        signal: aborts the batch (every call still gets its result).
    """
    calls = [c for c in tool_calls if field(c, "type", "function") == "function"]
    items = [(field(field(c, "function"), "name"), field(field(c, "function"), "arguments") or "",
              field(c, "id")) for c in calls]
    results = await session.call_batch(items, agent=agent, signal=signal)
    return [{"role": "tool", "tool_call_id": call_id, "content": result_text(result)}
            for (_, _, call_id), result in zip(items, results, strict=True)]


async def function_call_outputs(session: Session, output: Iterable[Any], *,
                                agent: str | None = None,
                                signal: Signal | None = None) -> list[dict[str, Any]]:
    """Run the `function_call` items of a Responses output; return one `FunctionCallOutput`
    input item (`{"type": "function_call_output", "call_id", "output"}`) per call, in order.
    Other items (messages, reasoning) are skipped.

    Args:
        output: `response.output` (SDK items or dicts).
        agent, signal: as for `tool_messages`.
    """
    calls = [item for item in output if field(item, "type") == "function_call"]
    items = [(field(c, "name"), field(c, "arguments") or "", field(c, "call_id")) for c in calls]
    results = await session.call_batch(items, agent=agent, signal=signal)
    return [{"type": "function_call_output", "call_id": call_id, "output": result_text(result)}
            for (_, _, call_id), result in zip(items, results, strict=True)]
