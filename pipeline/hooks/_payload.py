"""The JSON a command hook reads on stdin.

Shape (keys in this order; optional ones only when they apply)::

    {
      "hook_event_name": "PreToolUse" | "PostToolUse",
      "tool_name": str,
      "tool_input": {...},                     # the frozen arguments, as JSON
      "tool_response": {"content": [blocks], "isError": bool},   # PostToolUse only
      "call_id": str,
      "root_call_id": str,
      "parent_call_id": str,                   # Code-Mode sub-calls only
      "agent": str,                            # when the call has one
      "cwd": str                               # the host process's working directory
    }

``parent_call_id`` of a sub-call is the outer call id in front of ``":code:<n>"`` in its
``call_id`` (docs/pipeline-spec.md §11.4), else its ``root_call_id``.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from .._execution import Execution
from .._lossless import thaw
from .._result import CallResult

__all__ = ["EVENT_NAMES", "payload"]

#: extension point -> ``hook_event_name``
EVENT_NAMES = {"tools/pre-execute": "PreToolUse", "tools/post-execute": "PostToolUse"}


def _parent_call_id(execution: Execution) -> str | None:
    if execution.parent is None:
        return None
    outer, marker, _ = execution.call_id.rpartition(":code:")
    return outer if marker and outer else execution.root_call_id


def payload(point: str, execution: Execution, result: CallResult | None = None) -> bytes:
    """The stdin bytes (UTF-8 JSON) for ``point`` (a key of ``EVENT_NAMES``)."""
    body: dict[str, Any] = {
        "hook_event_name": EVENT_NAMES[point],
        "tool_name": execution.name,
        "tool_input": thaw(execution.arguments) if execution.arguments is not None else None,
    }
    if result is not None:
        body["tool_response"] = {
            "content": [thaw(block) for block in result.content],
            "isError": result.is_error,
        }
    body["call_id"] = execution.call_id
    body["root_call_id"] = execution.root_call_id
    parent = _parent_call_id(execution)
    if parent is not None:
        body["parent_call_id"] = parent
    if execution.agent is not None:
        body["agent"] = execution.agent
    body["cwd"] = os.getcwd()
    return msgspec.json.encode(body)
