"""The Anthropic SDK: tool definitions for the Messages API, and the `tool_result` blocks
that answer a message's `tool_use` blocks (docs/integrations.md).

    message = client.messages.create(model=..., messages=messages, tools=tools(session))
    messages += [{"role": "assistant", "content": message.content},
                 {"role": "user", "content": await tool_results(session, message.content)}]

The definitions are the session's model-facing tools for `agent` (`Session.model_tools`:
`run_code` alone in code mode) as `ToolParam` dicts. The `tool_use` blocks (SDK objects or
dicts) run as one batch (`Session.call_batch`, one step, the model's ids), so every call
goes through the pipeline and the log; a failure is a `tool_result` with `is_error: true`
and the error text. The SDK itself is not imported.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from codemode.pipeline import Session, Signal, thaw

from ._common import field, result_text

__all__ = ["tool_results", "tools"]


def tools(session: Session, *, agent: str | None = None) -> list[dict[str, Any]]:
    """`tools=` for `messages.create`: one `ToolParam` (`{name, description, input_schema}`)
    per model-facing tool of the session."""
    return [{"name": t["name"], "description": t["description"],
             "input_schema": thaw(t["parameters"])}
            for t in session.model_tools(agent)]


async def tool_results(session: Session, content: Iterable[Any], *,
                       agent: str | None = None,
                       signal: Signal | None = None) -> list[dict[str, Any]]:
    """Run the `tool_use` blocks of an assistant message; return one `ToolResultBlockParam`
    (`{"type": "tool_result", "tool_use_id", "content", "is_error"}`) per block, in order.
    Other blocks (text, thinking) are skipped.

    Args:
        content: `message.content` (SDK blocks or dicts).
        agent: the calling agent (approval needs one).
        signal: aborts the batch (every call still gets its result).
    """
    uses = [block for block in content if field(block, "type") == "tool_use"]
    items = [(field(b, "name"), thaw(field(b, "input")) or {}, field(b, "id")) for b in uses]
    results = await session.call_batch(items, agent=agent, signal=signal)
    return [{"type": "tool_result", "tool_use_id": tool_use_id,
             "content": result_text(result) or "(no output)", "is_error": result.is_error}
            for (_, _, tool_use_id), result in zip(items, results, strict=True)]
