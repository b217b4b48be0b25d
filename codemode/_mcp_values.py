"""The value an MCP tool returned, unwrapped from the server framework's envelope.

MCP's `structuredContent` must be an object, so server SDKs wrap any other return value
(`-> str`, `-> list[dict]`, `-> int`) as `{"result": value}` and declare the envelope as the
tool's `outputSchema`. A program, its stub and the model should see the value itself:

    outputSchema marked "x-fastmcp-wrap-result": true          (FastMCP)
    outputSchema with exactly one property, "result", required,
    titled "<tool name>Output" or untitled                      (the MCP Python SDK)

For such a tool `wrapped_result` gives the inner schema (the envelope's `$defs` kept, so its
`$ref`s still resolve) and `unwrap` takes the value out of each answer. An object type that
happens to have a single `result` field keeps its own title (`class One(BaseModel)`: "One")
and is left as it is.
"""

from __future__ import annotations

from typing import Any

__all__ = ["unwrap", "wrapped_result"]

WRAP_MARK = "x-fastmcp-wrap-result"


def wrapped_result(tool_name: str, output_schema: Any) -> dict[str, Any] | None:
    """The schema of the wrapped value, or None when `output_schema` is not an envelope."""
    if not isinstance(output_schema, dict):
        return None
    props = output_schema.get("properties")
    if not isinstance(props, dict) or set(props) != {"result"}:
        return None
    marked = output_schema.get(WRAP_MARK) is True
    title = output_schema.get("title")
    sdk_wrap = (output_schema.get("required") == ["result"]
                and (title is None or title == f"{tool_name}Output"))
    if not (marked or sdk_wrap):
        return None
    inner = props["result"]
    if inner is True or inner == {}:
        inner = {}
    if not isinstance(inner, dict):
        return None
    inner = {k: v for k, v in inner.items() if k != "title"}
    defs = output_schema.get("$defs")
    if isinstance(defs, dict):
        inner["$defs"] = {**defs, **inner.get("$defs", {})}
    return inner


def unwrap(structured: Any) -> Any:
    """The value inside an envelope `{"result": value}` (as is when it is not one)."""
    if isinstance(structured, dict) and set(structured) == {"result"}:
        return structured["result"]
    return structured
