"""What becomes of a line of a server's stdout the MCP SDK could not parse: repaired and
delivered, turned into an error answering the call it names, or failing the calls in
flight. Apart from the transport, which only hands such a line over (`transport.relay`),
and from the server's lifecycle, which only keeps the set of calls in flight.

A message from the server that cannot be parsed never leaves a call waiting for its
timeout. Unpaired surrogate escapes (`"\\ud835"`, which Node servers emit) are repaired to
U+FFFD and the message is delivered; so are bytes that are not UTF-8 (each becomes U+FFFD:
the stdio transport decodes with `errors="replace"`). Anything else that does not parse
(JSON nested deeper than the parser follows, a `"jsonrpc"` other than `"2.0"`, a JSON-RPC
batch, which MCP does not use) fails the call it answers (found by its `id`, also inside a
batch or a line too deep to decode) at once with `McpProtocolError`, naming the server; a
broken line that names no id but looks like a message (`{...`, `[...`) fails every call in
flight on that server, and so does a line whose recovery itself fails; a line that is not
JSON at all (stray output on stdout) is ignored with a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Set
from typing import Any

import mcp_types
from mcp.shared.message import SessionMessage
from mcp_types import PARSE_ERROR

from .errors import McpProtocolError

__all__ = ["fail_in_flight", "recover"]

_log = logging.getLogger("codemode.mcp")

# an id followed by what ends a JSON value: a number cut short (`"id": 1` of 12) is no id
_ID = re.compile(r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*[,}\]]')
_LONE_SURROGATE = re.compile(
    "[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")


_TOO_DEEP = "JSON nested too deeply to parse"


def recover(exc: Exception, *, server: str,
            in_flight: Set[asyncio.Future[None]]) -> list[SessionMessage]:
    """What to deliver for a line of `server`'s stdout the SDK could not parse (module
    docstring): the message with unpaired surrogates repaired, JSON-RPC errors answering
    the calls it names, or nothing (then the futures of `in_flight` may have failed).
    Never raises: a recovery that fails fails every call in flight instead."""
    try:
        return _recover_line(exc, server, in_flight)
    except Exception as failure:
        fail_in_flight(in_flight, f"a message that could not be parsed nor recovered "
                                  f"({type(failure).__name__}: {failure})", server=server)
        return []


def fail_in_flight(in_flight: Set[asyncio.Future[None]], detail: str, *, server: str) -> None:
    """Fail each future of `in_flight` not yet done with `McpProtocolError(detail)`."""
    for waiting in tuple(in_flight):
        if not waiting.done():
            waiting.set_exception(McpProtocolError(detail, server=server))


def _parse_error(server: str, request_id: int | str, detail: str) -> SessionMessage:
    """A JSON-RPC error answering `request_id`: its call fails `McpProtocolError`."""
    return SessionMessage(mcp_types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(
            code=PARSE_ERROR, message=f"MCP server {server!r} sent an answer that "
                                      f"could not be parsed: {detail}")))


def _recover_line(exc: Exception, server: str,
                  in_flight: Set[asyncio.Future[None]]) -> list[SessionMessage]:
    raw = _raw_input(exc)
    detail = _parse_detail(exc)
    data: Any = raw
    # Nested past the SDK parser's own bound: not decoded here, whose bound would be the
    # interpreter's (deeper from Python 3.13), so the answer fails the same everywhere.
    if isinstance(raw, str) and detail != _TOO_DEEP:
        try:
            data = json.loads(raw)
        except RecursionError:
            data, detail = None, _TOO_DEEP
        except ValueError:
            data = None
    if isinstance(data, list):              # a JSON-RPC batch: fail each call it answers
        ids = [found for item in data if (found := _message_id(item, None)) is not None]
        detail = "a JSON-RPC batch (MCP sends one message per line)"
        if not ids:
            fail_in_flight(in_flight, detail, server=server)
        return [_parse_error(server, found, detail) for found in ids]
    if isinstance(data, dict):
        try:
            repaired = _without_lone_surrogates(data)
            message = mcp_types.jsonrpc_message_adapter.validate_python(
                repaired, by_name=False)
        except RecursionError:
            detail = _TOO_DEEP
        except ValueError:
            if data.get("jsonrpc") != "2.0":
                detail = f'its "jsonrpc" is {json.dumps(data.get("jsonrpc"))}, not "2.0"'
        else:
            if repaired != data:
                _log.warning("MCP server %r sent unpaired surrogates; replaced with U+FFFD",
                             server)
            return [SessionMessage(message)]
    # A request or notification names a method and answers nothing. A line too broken
    # to decode may be an answer whatever it holds (its keys may be what broke), so it
    # is treated as one: failing a call early beats leaving it waiting.
    if isinstance(data, dict) and isinstance(data.get("method"), str) \
            and not data.keys() & {"result", "error"}:
        # A request or notification from the server: it answers none of our calls
        # (its id, if any, is the server's own), so there is nothing to fail.
        _log.warning("MCP server %r sent a request or notification that could not be "
                     "parsed: %s", server, detail)
        return []
    request_id = _message_id(data, raw)
    if request_id is not None:
        return [_parse_error(server, request_id, detail)]
    looks_like_a_message = isinstance(data, dict) or _an_object_refused(exc) or (
        isinstance(raw, str) and raw.lstrip().startswith(("{", "[")))
    if looks_like_a_message:
        fail_in_flight(in_flight, detail, server=server)
    else:
        _log.warning("MCP server %r wrote a line to stdout that is not a message: %s",
                     server, detail)
    return []


def _raw_input(exc: Exception) -> Any:
    """The line (or its decoded JSON) the SDK's parser refused, when it says: the line of a
    JSON error, else the whole message a validation error names (an error at the top of a
    union member, or a field missing there), else the first error's input."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return None
    try:
        found = errors()
    except Exception:
        return None
    for error in found:
        if error.get("type") == "json_invalid":
            return error.get("input")
    for error in found:
        loc = error.get("loc", ())
        if len(loc) <= 1 or (len(loc) == 2 and error.get("type") == "missing"):
            return error.get("input")
    return found[0].get("input") if found else None


def _an_object_refused(exc: Exception) -> bool:
    """The SDK's parser refused a JSON object by its fields (an error below the top of a
    union member): a message, though its fields may not say which call it answers."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return False
    try:
        return any(len(error.get("loc", ())) >= 2 for error in errors())
    except Exception:
        return False


def _parse_detail(exc: Exception) -> str:
    """Why the SDK refused a line: the JSON error, or that it is no JSON-RPC message."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        with contextlib.suppress(Exception):
            found = errors()
            if found and found[0].get("type") == "json_invalid":
                text = str(found[0].get("msg") or exc)
                return _TOO_DEEP if "recursion limit" in text else text
            if found:
                return "valid JSON, but not a JSON-RPC message"
    return str(exc) or type(exc).__name__


def _message_id(data: Any, raw: Any) -> int | str | None:
    """The JSON-RPC id a broken answer carries, from its decoded JSON or its text."""
    if isinstance(data, dict):
        found = data.get("id")
        return found if isinstance(found, (int, str)) and not isinstance(found, bool) else None
    if isinstance(raw, str):
        match = _ID.search(raw)
        if match:
            text = match.group(1)
            with contextlib.suppress(ValueError):
                value = json.loads(text)
                if isinstance(value, (int, str)):
                    return value
    return None


def _without_lone_surrogates(value: Any) -> Any:
    """`value` with each unpaired surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    return value
