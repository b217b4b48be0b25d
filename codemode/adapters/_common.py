"""What the SDK adapters share: reading a tool call from an SDK object or a dict, and the
text of a result."""

from __future__ import annotations

import json
from typing import Any

from codemode.pipeline import CallResult, thaw

__all__ = ["field", "result_text"]


def field(item: Any, name: str, default: Any = None) -> Any:
    """`item.name` for an SDK model, `item[name]` for its dict (param) form."""
    if isinstance(item, dict):
        return item.get(name, default)
    return getattr(item, name, default)


def result_text(result: CallResult) -> str:
    """What the model reads: text blocks as they are, any other block as its JSON."""
    parts = []
    for block in result.content:
        plain = thaw(block)
        if isinstance(plain, dict) and plain.get("type") == "text":
            parts.append(str(plain.get("text", "")))
        else:
            parts.append(json.dumps(plain, ensure_ascii=False))
    return "\n".join(parts)
