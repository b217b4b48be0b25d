"""The value an MCP tool returned: unwrapped from the server framework's envelope, and kept
whole when a part of it is not lossless JSON.

MCP's `structuredContent` must be an object, so server SDKs wrap any other return value
(`-> str`, `-> list[dict]`, `-> int`) as `{"result": value}` and declare the envelope as the
tool's `outputSchema`. A program, its stub and the model should see the value itself:

    outputSchema marked "x-fastmcp-wrap-result": true          (FastMCP)
    outputSchema with exactly one property, "result", required,
    titled "<function name>Output" or untitled                  (the MCP Python SDK)

The SDK titles the envelope after the Python function (`_create_wrapped_model` in
`mcp.server.mcpserver.utilities.func_metadata`), not after the tool's published name: a tool
declared `@server.tool(name="get-weather")` on `def get_weather() -> str` has the envelope
"get_weatherOutput". So the title is read by its shape (a Python identifier followed by
"Output"), whatever the tool is called.

For such a tool `wrapped_result` gives the inner schema (the envelope's `$defs` kept, so its
`$ref`s still resolve) and `unwrap` takes the value out of each answer. An object type that
happens to have a single `result` field keeps its own title (`class One(BaseModel)`: "One")
and is left as it is.
"""

from __future__ import annotations

import re
from typing import Any

from .._run.stubs import LOSSLESS_MARKER_KEY
from .._run.tagged import WIRE_TAGS

__all__ = ["MARKER_KEY", "admit_markers", "lossless", "unwrap", "wrapped_result"]

WRAP_MARK = "x-fastmcp-wrap-result"
# the MCP Python SDK's envelope title: f"{func.__name__}Output"
_SDK_TITLE = re.compile(r"[^\W\d]\w*Output", re.ASCII)

# Lossless values. The pipeline keeps only values a JSON round trip returns unchanged (ints
# within 64 bits: many readers turn bigger ones into lossy floats). A server may send more
# (an id equal to 2**64 - 1): that part becomes the tag the run's value encoding uses,
# `{"$int": "18446744073709551615"}` (NaN and the infinities: `{"$float": "nan"}`), and the
# rest of the result is kept. The tool's output schema admits the tags where it allows a
# number (a branch marked MARKER_KEY, which stubs leave out of the return type).
MARKER_KEY = LOSSLESS_MARKER_KEY
_MARKER_SCHEMA = {
    MARKER_KEY: True, "type": "object", "minProperties": 1, "maxProperties": 1,
    "propertyNames": {"enum": ["$int", "$float"]},
    "additionalProperties": {"type": "string"},
}
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_DIGITS_LIMIT = 4300      # CPython's int/str conversion limit: beyond it, hex (as the guest)


def wrapped_result(tool_name: str, output_schema: Any) -> dict[str, Any] | None:
    """The schema of the wrapped value, or None when `output_schema` is not an envelope.

    Args:
        tool_name: the tool's published name (for the messages of callers; the envelope is
            recognised by the schema's shape alone, see the module docstring).
        output_schema: the tool's `outputSchema` as listed (any JSON).
    """
    if not isinstance(output_schema, dict):
        return None
    props = output_schema.get("properties")
    if not isinstance(props, dict) or set(props) != {"result"}:
        return None
    marked = output_schema.get(WRAP_MARK) is True
    title = output_schema.get("title")
    sdk_wrap = (output_schema.get("required") == ["result"]
                and (title is None
                     or (isinstance(title, str) and _SDK_TITLE.fullmatch(title) is not None)))
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


def lossless(value: Any) -> Any:
    """`value` with each part that is not lossless JSON replaced by its tag (see above),
    and each of the server's own one-key dicts whose key is a tag written as
    `{"$dict": [[key, value]]}`, so that a tag never means two things: the program gets the
    `int`, `float` or `dict` back on every tier (`codemode._run.tagged`)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if _INT_MIN <= value <= _INT_MAX:
            return value
        text = str(value) if value.bit_length() < _DIGITS_LIMIT * 3 else f"{value:#x}"
        return {"$int": text}
    if isinstance(value, float):
        if value != value:
            return {"$float": "nan"}
        if value in (float("inf"), float("-inf")):
            return {"$float": "inf" if value > 0 else "-inf"}
        if value == 0.0 and str(value).startswith("-"):
            return {"$float": "-0.0"}
        return value
    if isinstance(value, list):
        return [lossless(item) for item in value]
    if isinstance(value, dict):
        inner = {key: lossless(item) for key, item in value.items()}
        if len(inner) == 1 and next(iter(inner)) in WIRE_TAGS:    # the server's own dict
            return {"$dict": [list(item) for item in inner.items()]}
        return inner
    return value


# Keywords whose value is a subschema, a list of them, or a map of them.
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains",
        "propertyNames", "unevaluatedItems", "unevaluatedProperties")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def admit_markers(schema: Any) -> Any:
    """`schema` where every subschema that allows an integer or a number also allows the tag
    `lossless` puts in place of one that JSON cannot carry."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, sub in schema.items():
        if key in _ONE:
            out[key] = admit_markers(sub)
        elif key in _MANY and isinstance(sub, list):
            out[key] = [admit_markers(item) for item in sub]
        elif key in _MAP and isinstance(sub, dict):
            out[key] = {name: admit_markers(item) for name, item in sub.items()}
        else:
            out[key] = sub
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else []
    if "integer" in kinds or "number" in kinds:
        return {"anyOf": [out, _MARKER_SCHEMA]}
    return out
