"""What the answer to a `tools/call` becomes: the value a program receives, the content the
model is shown, or the `McpError` the call raises. Apart from the server's lifecycle, which
sends the request and waits; this module only reads what came back.

What a program receives from a call:

    structuredContent present (the result carried the field)   that JSON value, as is; the
                                                               value inside the SDK's
                                                               {"result": v} envelope for a
                                                               tool whose outputSchema is one
                                                               (`values`)
    otherwise, only text blocks (or none)                      the text blocks joined with
                                                               "\\n" (a str; text that happens
                                                               to be JSON is NOT decoded:
                                                               the text is what the server
                                                               said, and a tool without an
                                                               outputSchema promises no shape)
    otherwise (images, audio, resources, ...)                  the content blocks as JSON
                                                               objects (MCP wire field names)

What the model receives (the definition's rendering, `render`): the same content blocks,
images, audio and embedded resources included, so a direct call shows them as content and a
sub-call's are forwarded after the outer `run_code` result like a native tool's images. An
answer with structured content beside media keeps the structured value for programs and
defers the media blocks to after the result.

A JSON-RPC error is classified by its code: `-32700` (parse error) is `McpProtocolError`;
the SDK's own "connection closed" (`-32000`, raised when the server's stdout ends) is
`McpServerDied`, but the same code sent by a live server is the server's error,
`McpToolError`, like every other code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, PARSE_ERROR, REQUEST_TIMEOUT

from codemode.pipeline import default_render

from .errors import McpCallTimeout, McpProtocolError, McpServerDied, McpToolError
from .values import lossless, unwrap

__all__ = ["answer", "render"]


def answer(tool_name: str, request: asyncio.Future[Any], *, server: str, wrapped: bool,
           ended: bool, died: Callable[[str], McpServerDied],
           media: Callable[[list[dict[str, Any]]], None] | None = None) -> Any:
    """The value a program receives from the finished `request` to `tool_name` on `server`
    (module docstring), or the error it raises.

    Args:
        wrapped: the tool's structured value is the SDK's `{"result": v}` envelope.
        ended: the server's stdout ended or the session is being closed (the SDK's
            "connection closed" is then the server's death).
        died: makes the `McpServerDied` for a detail (it quotes the server's stderr).
        media: as for `McpServer.call`.
    Raises:
        McpProtocolError, McpToolError, McpServerDied, McpCallTimeout: as the module
            docstring classifies them.
    """
    exc = request.exception()
    if exc is None:
        return _unwrap(tool_name, request.result(), server=server, wrapped=wrapped,
                       media=media)
    if isinstance(exc, MCPError):
        # the SDK's own: the server's stdout ended, or we are closing the session
        if exc.code == CONNECTION_CLOSED and ended:
            raise died(f"closed the connection while {tool_name!r} was running") \
                from exc
        if exc.code == REQUEST_TIMEOUT:
            raise McpCallTimeout(f"MCP tool {tool_name!r} on server {server!r}: "
                                 f"{exc.message}", server=server) from exc
        if exc.code == PARSE_ERROR:
            raise McpProtocolError(exc.message, server=server) from exc
        raise McpToolError(exc.message, server=server) from exc
    # e.g. the SDK's RuntimeError for structured content that breaks the outputSchema
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    raise McpToolError(f"MCP tool {tool_name!r} on server {server!r} failed: {detail}",
                       server=server) from exc


def _unwrap(tool_name: str, result: Any, *, server: str, wrapped: bool,
            media: Callable[[list[dict[str, Any]]], None] | None = None) -> Any:
    texts = [block.text for block in result.content if getattr(block, "type", "") == "text"]
    if result.is_error:
        message = "\n".join(texts) or f"MCP tool {tool_name!r} failed (no message)"
        raise McpToolError(message, server=server)
    blocks = [block.model_dump(mode="json", by_alias=True, exclude_none=True)
              for block in result.content]
    if result.structured_content is not None or \
            "structured_content" in result.model_fields_set:
        extra = [b for b in blocks if b.get("type") != "text"]
        if extra and media is not None:
            media(extra)
        value = result.structured_content
        if wrapped:
            value = unwrap(value)
        return lossless(value)
    if len(texts) == len(result.content):
        return "\n".join(texts)
    return blocks


def render(args: Any, value: Any) -> list[dict[str, Any]]:
    """The model-facing content of a call: an answer made of content blocks (images, audio,
    resources) is shown as those blocks; any other value as text (`default_render`)."""
    if isinstance(value, list) and value and all(
            isinstance(b, dict) and isinstance(b.get("type"), str) for b in value) and \
            any(b["type"] != "text" for b in value):
        return list(value)
    return default_render(value)
