"""MCP servers over stdio as pipeline tools (docs/design.md §1, §2).

`McpServer.connect(command)` starts a server process, performs the MCP handshake, lists its
tools and turns each into a `ToolDefinition` whose body sends `tools/call` to that server.
`McpServer.connect_url(url)` does the same for a server already listening on streamable HTTP.
`connect_servers([...], urls=[...])` connects several and closes them all on exit.

Ownership. The MCP SDK's transport and session are anyio contexts (cancel scopes and task
groups) that must be entered and exited by one task. Each `McpServer` therefore runs a
dedicated *owner task* that enters `stdio_client` and `ClientSession`, reports readiness, and
then waits for `aclose()` to ask it to leave; tool calls from any other task of the same
event loop go through the `ClientSession` object (requests are correlated by id, so calls
may overlap). Nothing else enters or exits those contexts.

What a program receives from a call:

    structuredContent present (the result carried the field)   that JSON value, as is; the
                                                               value inside the SDK's
                                                               {"result": v} envelope for a
                                                               tool whose outputSchema is one
                                                               (`_mcp_values`)
    otherwise, only text blocks (or none)                      the text blocks joined with
                                                               "\\n" (a str; text that happens
                                                               to be JSON is NOT decoded:
                                                               the text is what the server
                                                               said, and a tool without an
                                                               outputSchema promises no shape)
    otherwise (images, audio, resources, ...)                  the content blocks as JSON
                                                               objects (MCP wire field names)

What the model receives (the definition's rendering): the same content blocks, images,
audio and embedded resources included, so a direct call shows them as content and a
sub-call's are forwarded after the outer `run_code` result like a native tool's images. An
answer with structured content beside media keeps the structured value for programs and
defers the media blocks to after the result.

A message from the server that cannot be parsed never leaves a call waiting for its
timeout. Unpaired surrogate escapes (`"\\ud835"`, which Node servers emit) are repaired to
U+FFFD and the message is delivered; so are bytes that are not UTF-8 (each becomes U+FFFD:
the stdio transport decodes with `errors="replace"`). Anything else that does not parse
(JSON nested deeper than the parser follows, a `"jsonrpc"` other than `"2.0"`, a JSON-RPC
batch, which MCP does not use) fails the call it answers (found by its `id`, also inside a
batch or a line too deep to decode) at once with `McpProtocolError`, naming the server; a
broken line that names no id but looks like a message (`{...`, `[...`) fails every call in
flight on that server, and so does a line whose recovery itself fails; a line that is not
JSON at all (stray output on stdout) is ignored with a warning. The same holds for the
answers of the handshake and the tool listing: start-up fails at once (`McpStartError`)
instead of waiting out `startup_timeout_s`.

A JSON-RPC error is classified by its code: `-32700` (parse error) is `McpProtocolError`;
the SDK's own "connection closed" (`-32000`, raised when the server's stdout ends) is
`McpServerDied`, but the same code sent by a live server is the server's error,
`McpToolError`, like every other code.

The error tree (each is a `HarnessError`, so a failed call keeps `{name, code}` in the log
and the program sees the code on its `ToolCallError`)::

    McpError                MCP_ERROR
     ├── McpStartError      MCP_START_FAILED  bad command, early exit, handshake timeout;
     │                                        the message names the command and ends with
     │                                        the tail of the server's stderr
     ├── McpServerDied      MCP_SERVER_DIED   the connection ended while a call was pending
     │                                        (or before it was sent)
     ├── McpCallTimeout     TOOL_TIMEOUT      no answer within `call_timeout_s` (or the
     │                                        timeout given to `call`)
     ├── McpProtocolError   MCP_PROTOCOL_ERROR the server's answer could not be parsed
     └── McpToolError       TOOL_ERROR        the server answered `isError: true` (message:
                                              the server's text) or with a JSON-RPC error
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shlex
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import anyio
import mcp_types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, PARSE_ERROR, REQUEST_TIMEOUT, PaginatedRequestParams

from codemode.pipeline import HarnessError, RunContext, ToolDefinition, default_render

from .values import admit_markers, lossless, unwrap, wrapped_result


class _OncePerMessage(logging.Filter):
    """Let each distinct message through once: a server that writes a flood of non-MCP
    lines would otherwise log a traceback per line (the SDK logs every parse failure)."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        key = record.getMessage()
        if key in self._seen:
            return False
        self._seen.add(key)
        record.exc_info = None          # one line is enough; the start error says the rest
        return True


logging.getLogger("mcp.client.stdio").addFilter(_OncePerMessage())
_log = logging.getLogger("codemode.mcp")

__all__ = [
    "IDEMPOTENCY_META_KEY",
    "McpCallTimeout",
    "McpError",
    "McpProtocolError",
    "McpServer",
    "McpServerDied",
    "McpStartError",
    "McpToolError",
    "connect_servers",
]

IDEMPOTENCY_META_KEY = "codemode/idempotencyKey"
"""The `_meta` key of a `tools/call` request that carries the call's idempotency key (a
sub-call's `"<run id>:<n>"`, the same when the run is replayed after a pause)."""

STDERR_TAIL_BYTES = 2000
"""How much of the end of a server's stderr an error message quotes, in bytes."""

_CLOSE_TIMEOUT_S = 10.0  # the SDK's own shutdown is bounded by ~6 s (stdin close, TERM, KILL)


class McpError(HarnessError):
    """Base of the MCP adapter's errors.

    Attributes:
        server: the server's display name.
        code: stable code (see the module docstring).
    """

    code = "MCP_ERROR"

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class McpStartError(McpError):
    """The server did not start: the command could not be run, it exited before answering,
    or the handshake did not complete within `startup_timeout_s`.

    Attributes:
        command: the argv that was run.
        stderr_tail: the last `STDERR_TAIL_BYTES` bytes of its stderr, decoded (may be "").
    """

    code = "MCP_START_FAILED"

    def __init__(self, message: str, *, server: str, command: Sequence[str],
                 stderr_tail: str) -> None:
        super().__init__(message, server=server)
        self.command = tuple(command)
        self.stderr_tail = stderr_tail


class McpServerDied(McpError):
    """The connection to a running server ended (the process exited or closed stdout)."""

    code = "MCP_SERVER_DIED"


class McpCallTimeout(McpError):
    """A `tools/call` got no answer within the server's `call_timeout_s`."""

    code = "TOOL_TIMEOUT"


class McpProtocolError(McpError):
    """The server sent an answer that could not be parsed (not JSON, or not a JSON-RPC
    message); the call it answered, or every call in flight when it named none, fails at
    once instead of waiting for its timeout."""

    code = "MCP_PROTOCOL_ERROR"


class McpToolError(McpError):
    """The server reported a failed call: `isError: true` (message: its text content) or a
    JSON-RPC error such as an unknown tool or invalid parameters (message: the error's)."""

    code = "TOOL_ERROR"


class _StartFailure(Exception):
    """Owner task -> `connect`: why the start failed (becomes an `McpStartError`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _argv(command: str | Sequence[str]) -> list[str]:
    if isinstance(command, str):
        argv = shlex.split(command)
    else:
        argv = [str(part) for part in command]
    if not argv or not argv[0]:
        raise ValueError(f"empty MCP server command: {command!r}")
    return argv


def _default_name(argv: Sequence[str]) -> str:
    """The module after `-m` (`mcp_server_time`), the stem of a script run by a Python
    interpreter (`server` for `python server.py`), else the program's file name."""
    if len(argv) >= 3 and argv[1] == "-m":
        return argv[2]
    program = Path(argv[0]).name
    if program.startswith("python") and len(argv) >= 2 and argv[1].endswith(".py"):
        return Path(argv[1]).stem
    return program


class McpServer:
    """One connected MCP server and its tools as pipeline `ToolDefinition`s.

    Create with `await McpServer.connect(...)`; close with `await aclose()` (idempotent) or
    use `async with`. Use it from the event loop it was connected on.

    Attributes:
        name: display name, used in error messages.
        command: the argv the server was started with.
        definitions: one `ToolDefinition` per MCP tool, in the server's listing order;
            `parameters` is the tool's `inputSchema`, `output_schema` its `outputSchema`
            (or `None`), `is_concurrency_safe` answers `True` for tools annotated
            `readOnlyHint: true`.
        tools: the MCP `Tool` objects as listed.
        server_info: the server's `Implementation` (name, version) from the handshake.
        call_timeout_s: seconds a call may wait for its answer.
    """

    def __init__(self, *, name: str, command: Sequence[str], call_timeout_s: float,
                 stderr: IO[bytes]) -> None:
        self.name = name
        self.command = tuple(command)
        self.call_timeout_s = call_timeout_s
        self.definitions: list[ToolDefinition] = []
        self._wrapped: set[str] = set()     # tools whose structured value is an envelope
        self.tools: list[Any] = []
        self.server_info: Any = None
        self._stderr = stderr
        self._session: ClientSession | None = None
        self._in_flight: set[asyncio.Future[None]] = set()   # fail all: a broken answer
        self._ended = asyncio.Event()   # the server's messages stopped (stdout closed)
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("dead" if not self.alive else "open")
        return f"<McpServer {self.name!r} {state} tools={len(self.definitions)}>"

    # ---- lifetime ------------------------------------------------------------------------

    @classmethod
    async def connect(
        cls,
        command: str | Sequence[str],
        *,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        startup_timeout_s: float = 20.0,
        call_timeout_s: float = 60.0,
    ) -> McpServer:
        """Start a server, complete the MCP handshake and list its tools.

        Args:
            command: argv, or one string split with `shlex` (`"python -m mcp_server_git
                --repository /r"`).
            name: display name (default: the module after `-m`, else the program's name).
            env: variables added over the SDK's default environment (HOME, PATH, ...);
                the rest of this process's environment is not passed on.
            cwd: the server's working directory (default: this process's).
            startup_timeout_s: seconds for spawn + handshake + tool listing (> 0).
            call_timeout_s: seconds each `tools/call` may take (> 0).
        Returns:
            the connected server; its owner task runs until `aclose()`.
        Raises:
            ValueError: an empty command or a non-positive timeout.
            McpStartError: the command could not be run, the process exited before the
                handshake completed, the handshake failed, or it took longer than
                `startup_timeout_s` (the process is then stopped).
        """
        if not startup_timeout_s > 0 or not call_timeout_s > 0:
            raise ValueError("startup_timeout_s and call_timeout_s must be positive")
        argv = _argv(command)
        stderr = tempfile.TemporaryFile()  # noqa: SIM115  (the server owns it; _release closes it)
        server = cls(name=name or _default_name(argv), command=argv,
                     call_timeout_s=call_timeout_s, stderr=stderr)
        params = StdioServerParameters(
            command=argv[0], args=argv[1:], env=dict(env) if env is not None else None,
            cwd=os.fspath(cwd) if cwd is not None else None,
            encoding_error_handler="replace")       # a stray byte must not end the reader
        return await server._start(lambda: stdio_client(params, errlog=server._stderr),  # type: ignore[arg-type]
                                   startup_timeout_s)

    @classmethod
    async def connect_url(
        cls,
        url: str,
        *,
        name: str | None = None,
        startup_timeout_s: float = 20.0,
        call_timeout_s: float = 60.0,
    ) -> McpServer:
        """Connect to a server listening on streamable HTTP, complete the MCP handshake and
        list its tools.

        Args:
            url: the server's MCP endpoint (`http://127.0.0.1:8000/mcp`).
            name: display name (default: the URL's host and port).
            startup_timeout_s: seconds for connection + handshake + tool listing (> 0).
            call_timeout_s: seconds each `tools/call` may take (> 0).
        Raises:
            ValueError: a URL that is not http(s), or a non-positive timeout.
            McpStartError: the server could not be reached, the handshake failed, or it took
                longer than `startup_timeout_s`.
        """
        from urllib.parse import urlsplit

        from mcp.client.streamable_http import streamable_http_client

        if not startup_timeout_s > 0 or not call_timeout_s > 0:
            raise ValueError("startup_timeout_s and call_timeout_s must be positive")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"not an http(s) URL: {url!r}")
        server = cls(name=name or parts.netloc, command=(url,), call_timeout_s=call_timeout_s,
                     stderr=tempfile.TemporaryFile())  # noqa: SIM115  (the server owns it)
        return await server._start(lambda: streamable_http_client(url), startup_timeout_s)

    async def _start(self, transport: Callable[[], Any], startup_timeout_s: float) -> McpServer:
        """Run the owner task over `transport` and wait for the handshake (see `connect`)."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._owner = asyncio.create_task(self._own(transport, ready),
                                          name=f"mcp-server {self.name}")
        reason: str | None = None
        try:
            await asyncio.wait_for(asyncio.shield(ready), startup_timeout_s)
        except TimeoutError:
            reason = f"did not complete the MCP handshake within {startup_timeout_s:g} s"
            await self._shutdown(cancel=True)
        except _StartFailure as failure:
            reason = failure.reason
            await self._shutdown(cancel=False)
        except BaseException:                    # the caller was cancelled: leave no process
            await self._shutdown(cancel=True)
            self._release()
            raise
        finally:
            if ready.done() and not ready.cancelled():
                ready.exception()                  # retrieved: no "never retrieved" warning
        if reason is not None:                     # after the process is gone: full stderr
            error = self._start_error(reason)
            self._release()
            raise error
        return self

    async def aclose(self) -> None:
        """Ask the owner task to leave the session and stop the process; wait for it.

        Idempotent. Bounded: the SDK closes stdin, waits, then terminates the process tree
        (a few seconds at worst); after `_CLOSE_TIMEOUT_S` the owner task is cancelled.
        Calls still pending fail with `McpServerDied`.
        """
        if self._closed:
            return
        await self._shutdown(cancel=False)
        self._release()

    async def __aenter__(self) -> McpServer:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    @property
    def alive(self) -> bool:
        """Whether the owner task still holds an open session."""
        return self._session is not None and self._owner is not None and not self._owner.done()

    def stderr_tail(self, limit_bytes: int = STDERR_TAIL_BYTES) -> str:
        """The last `limit_bytes` bytes of the server's stderr so far, decoded leniently."""
        try:
            fd = self._stderr.fileno()
            size = os.fstat(fd).st_size
            start = max(0, size - limit_bytes)
            data = os.pread(fd, size - start, start)
        except (OSError, ValueError):
            return ""
        return data.decode("utf-8", errors="replace")

    async def _own(self, transport: Callable[[], Any], ready: asyncio.Future[None]) -> None:
        """The owner task: enters and exits every SDK context of this connection
        (`transport()` is the SDK's stdio or streamable-HTTP client context).

        Messages from the server pass through `_relay`, which notices the end of the
        server's stdout; the task then leaves at once (the process has exited or is about
        to), so `alive` turns false without waiting for a call to fail.
        """
        try:
            async with transport() as (read, write):
                relayed, inbox = anyio.create_memory_object_stream[Any](0)
                ended = self._ended
                async with anyio.create_task_group() as relays:
                    relays.start_soon(_relay, read, relayed, ended, self._recover)
                    async with ClientSession(inbox, write) as session:
                        try:
                            init, tools = await self._handshake(session)
                        except Exception as exc:
                            _fail(ready, _StartFailure(_describe(exc)))
                            relays.cancel_scope.cancel()
                            return
                        self.server_info = init.server_info
                        self.tools = tools
                        self.definitions = [self._definition(t) for t in tools]
                        self._session = session
                        _settle(ready)
                        await _first(self._stop.wait(), ended.wait())
                        self._session = None
                    relays.cancel_scope.cancel()
        except asyncio.CancelledError:
            _fail(ready, _StartFailure("was cancelled while starting"))
            raise
        except Exception as exc:  # spawn failure (OSError), transport failure
            _fail(ready, _StartFailure(_describe(exc)))
        finally:
            self._session = None

    async def _handshake(self, session: ClientSession) -> tuple[Any, list[Any]]:
        """`initialize` and the tool listing; a broken message that names no request fails
        it at once (`_fail_in_flight`), as it fails a call.

        Raises:
            McpProtocolError: such a message arrived first; else what the SDK raised."""
        async def both() -> tuple[Any, list[Any]]:
            return await session.initialize(), await _list_all_tools(session)

        broken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._in_flight.add(broken)
        steps = asyncio.ensure_future(both())
        waiters: set[asyncio.Future[Any]] = {steps, broken}
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._in_flight.discard(broken)
            if not steps.done():
                steps.cancel()
                await asyncio.wait({steps})
        if steps.done() and not steps.cancelled() and steps.exception() is None:
            return steps.result()
        if broken.done():
            raise broken.exception()  # type: ignore[misc]
        return steps.result()

    async def _shutdown(self, *, cancel: bool) -> None:
        self._closed = True
        self._stop.set()
        owner = self._owner
        if owner is not None and not owner.done():
            if cancel:
                owner.cancel()
            done, _ = await asyncio.wait({owner}, timeout=_CLOSE_TIMEOUT_S)
            if not done:
                owner.cancel()
                await asyncio.wait({owner}, timeout=_CLOSE_TIMEOUT_S)
        if owner is not None and owner.done() and not owner.cancelled():
            owner.exception()                      # retrieved: never "never retrieved"

    def _release(self) -> None:
        """Close the stderr capture file (after the process is gone)."""
        with contextlib.suppress(OSError):
            self._stderr.close()

    def _start_error(self, reason: str) -> McpStartError:
        tail = self.stderr_tail()
        message = f"MCP server {self.name!r} ({shlex.join(self.command)}) {reason}"
        message += f"\nstderr:\n{tail.rstrip()}" if tail.strip() else "\n(no stderr output)"
        return McpStartError(message, server=self.name, command=self.command, stderr_tail=tail)

    def _died(self, detail: str) -> McpServerDied:
        message = f"MCP server {self.name!r} {detail}"
        tail = self.stderr_tail()
        if tail.strip():
            message += f"\nstderr:\n{tail.rstrip()}"
        return McpServerDied(message, server=self.name)

    # ---- tools ---------------------------------------------------------------------------

    def _definition(self, mcp_tool: Any) -> ToolDefinition:
        tool_name: str = mcp_tool.name

        async def execute(args: dict[str, Any], ctx: RunContext) -> Any:
            return await self.call(tool_name, args, signal=ctx.signal, media=ctx.defer_context,
                                   idempotency_key=ctx.idempotency_key)

        execute.__name__ = f"{tool_name}_execute"
        annotations = mcp_tool.annotations
        read_only = bool(annotations is not None and annotations.read_only_hint is True)
        safe: Callable[[Any], bool] | None = (lambda _args: True) if read_only else None
        output_schema = (dict(mcp_tool.output_schema)
                         if mcp_tool.output_schema is not None else None)
        inner = wrapped_result(tool_name, output_schema)
        if inner is not None:      # the framework's {"result": value} envelope: the value
            self._wrapped.add(tool_name)
            output_schema = inner
        if output_schema is not None:     # a too-big int becomes {"$int": ...}: allowed there
            output_schema = admit_markers(output_schema)
        return ToolDefinition(
            name=tool_name,
            description=mcp_tool.description or "",
            parameters=dict(mcp_tool.input_schema),
            execute=execute,
            output_schema=output_schema,
            render=_render,
            is_concurrency_safe=safe,
        )

    async def call(self, tool_name: str, arguments: Mapping[str, Any] | None = None, *,
                   idempotency_key: str | None = None,
                   signal: Any = None, timeout_s: float | None = None,
                   media: Callable[[list[dict[str, Any]]], None] | None = None) -> Any:
        """Send one `tools/call` and return the value a program receives (module docstring).

        Args:
            tool_name: the MCP tool's name.
            arguments: the arguments object (sent as is; the server validates it).
            signal: an optional `pipeline.Signal`; aborting it cancels the request and
                raises its reason (`AbortedError` by default).
            timeout_s: seconds to wait for the answer (default: `call_timeout_s`).
            media: called with the non-text content blocks (images, audio, resources) of an
                answer whose value is its structured content, which would otherwise drop
                them (a tool body passes its `defer_context`).
            idempotency_key: sent as `_meta["codemode/idempotencyKey"]` (the same for a
                sub-call replayed or retried), so the server can apply an effect once.
        Raises:
            McpProtocolError: the server's answer could not be parsed.
            McpToolError: `isError: true` or a JSON-RPC error from the server.
            McpServerDied: the connection is gone or ended before the answer.
            McpCallTimeout: no answer within the timeout.
            ValueError: the server was closed with `aclose()`.
        """
        if self._closed:
            raise ValueError(f"MCP server {self.name!r} is closed")
        session, owner = self._session, self._owner
        if session is None or owner is None or owner.done():
            raise self._died("is not running (it exited earlier)")
        if signal is not None:
            signal.throw_if_aborted()
        limit_s = self.call_timeout_s if timeout_s is None else timeout_s
        meta = None if idempotency_key is None else {IDEMPOTENCY_META_KEY: idempotency_key}
        request = asyncio.ensure_future(
            session.call_tool(tool_name, dict(arguments or {}), meta=meta))  # type: ignore[arg-type]
        broken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._in_flight.add(broken)
        waiters: set[asyncio.Future[Any]] = {request, owner, broken}
        aborted: asyncio.Future[Any] | None = None
        if signal is not None:
            aborted = asyncio.ensure_future(signal.wait())
            waiters.add(aborted)
        try:
            done, _ = await asyncio.wait(waiters, timeout=limit_s,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._in_flight.discard(broken)
            if aborted is not None:
                aborted.cancel()
            if not request.done():
                request.cancel()
                await asyncio.wait({request}, timeout=1.0)
            if request.done() and not request.cancelled():
                request.exception()                 # retrieved in every path
        if request in done:
            return self._value(tool_name, request, media)
        if broken in done:
            raise McpProtocolError(f"MCP server {self.name!r} sent a message that could not be "
                                   f"parsed while {tool_name!r} was running: {broken.exception()}",
                                   server=self.name)
        if aborted is not None and aborted in done:
            signal.throw_if_aborted()
        if owner in done:
            raise self._died(f"closed the connection while {tool_name!r} was running")
        raise McpCallTimeout(
            f"MCP tool {tool_name!r} on server {self.name!r} did not answer within "
            f"{limit_s:g} s", server=self.name)

    def _value(self, tool_name: str, request: asyncio.Future[Any],
               media: Callable[[list[dict[str, Any]]], None] | None = None) -> Any:
        exc = request.exception()
        if exc is None:
            return self._unwrap(tool_name, request.result(), media)
        if isinstance(exc, MCPError):
            # the SDK's own: the server's stdout ended, or we are closing the session
            if exc.code == CONNECTION_CLOSED and (self._ended.is_set() or self._stop.is_set()):
                raise self._died(f"closed the connection while {tool_name!r} was running") \
                    from exc
            if exc.code == REQUEST_TIMEOUT:
                raise McpCallTimeout(f"MCP tool {tool_name!r} on server {self.name!r}: "
                                     f"{exc.message}", server=self.name) from exc
            if exc.code == PARSE_ERROR:
                raise McpProtocolError(exc.message, server=self.name) from exc
            raise McpToolError(exc.message, server=self.name) from exc
        # e.g. the SDK's RuntimeError for structured content that breaks the outputSchema
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise McpToolError(f"MCP tool {tool_name!r} on server {self.name!r} failed: {detail}",
                           server=self.name) from exc

    def _unwrap(self, tool_name: str, result: Any,
                media: Callable[[list[dict[str, Any]]], None] | None = None) -> Any:
        texts = [block.text for block in result.content if getattr(block, "type", "") == "text"]
        if result.is_error:
            message = "\n".join(texts) or f"MCP tool {tool_name!r} failed (no message)"
            raise McpToolError(message, server=self.name)
        blocks = [block.model_dump(mode="json", by_alias=True, exclude_none=True)
                  for block in result.content]
        if result.structured_content is not None or \
                "structured_content" in result.model_fields_set:
            extra = [b for b in blocks if b.get("type") != "text"]
            if extra and media is not None:
                media(extra)
            value = result.structured_content
            if tool_name in self._wrapped:
                value = unwrap(value)
            return lossless(value)
        if len(texts) == len(result.content):
            return "\n".join(texts)
        return blocks

    def _recover(self, exc: Exception) -> list[SessionMessage]:
        """What to deliver for a line of the server's stdout the SDK could not parse
        (module docstring): the message with unpaired surrogates repaired, JSON-RPC errors
        answering the calls it names, or nothing (then calls in flight may have failed).
        Never raises: a recovery that fails fails every call in flight instead."""
        try:
            return self._recover_line(exc)
        except Exception as failure:
            self._fail_in_flight(f"a message that could not be parsed nor recovered "
                                 f"({type(failure).__name__}: {failure})")
            return []

    def _fail_in_flight(self, detail: str) -> None:
        for waiting in tuple(self._in_flight):
            if not waiting.done():
                waiting.set_exception(McpProtocolError(detail, server=self.name))

    def _parse_error(self, request_id: int | str, detail: str) -> SessionMessage:
        """A JSON-RPC error answering `request_id`: its call fails `McpProtocolError`."""
        return SessionMessage(mcp_types.JSONRPCError(
            jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(
                code=PARSE_ERROR, message=f"MCP server {self.name!r} sent an answer that "
                                          f"could not be parsed: {detail}")))

    def _recover_line(self, exc: Exception) -> list[SessionMessage]:
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
                self._fail_in_flight(detail)
            return [self._parse_error(found, detail) for found in ids]
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
                                 self.name)
                return [SessionMessage(message)]
        # A request or notification names a method and answers nothing. A line too broken
        # to decode may be an answer whatever it holds (its keys may be what broke), so it
        # is treated as one: failing a call early beats leaving it waiting.
        if isinstance(data, dict) and isinstance(data.get("method"), str) \
                and not data.keys() & {"result", "error"}:
            # A request or notification from the server: it answers none of our calls
            # (its id, if any, is the server's own), so there is nothing to fail.
            _log.warning("MCP server %r sent a request or notification that could not be "
                         "parsed: %s", self.name, detail)
            return []
        request_id = _message_id(data, raw)
        if request_id is not None:
            return [self._parse_error(request_id, detail)]
        looks_like_a_message = isinstance(data, dict) or _an_object_refused(exc) or (
            isinstance(raw, str) and raw.lstrip().startswith(("{", "[")))
        if looks_like_a_message:
            self._fail_in_flight(detail)
        else:
            _log.warning("MCP server %r wrote a line to stdout that is not a message: %s",
                         self.name, detail)
        return []


async def _list_all_tools(session: ClientSession) -> list[Any]:
    """Every page of `tools/list`, in order."""
    listing = await session.list_tools()
    tools = list(listing.tools)
    while listing.next_cursor:
        listing = await session.list_tools(
            params=PaginatedRequestParams(cursor=listing.next_cursor))
        tools.extend(listing.tools)
    return tools


def _describe(exc: BaseException) -> str:
    """A one-line reason for an exception, looking inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
        return "exited or closed its stdout before answering"
    if isinstance(exc, FileNotFoundError):
        return f"could not be started: command not found ({exc.strerror})"
    if isinstance(exc, PermissionError):
        return f"could not be started: permission denied ({exc.strerror})"
    if isinstance(exc, OSError):
        return f"could not be started: {exc}"
    text = str(exc)
    return f"failed: {type(exc).__name__}: {text}" if text else f"failed: {type(exc).__name__}"


def _render(args: Any, value: Any) -> list[dict[str, Any]]:
    """The model-facing content of a call: an answer made of content blocks (images, audio,
    resources) is shown as those blocks; any other value as text (`default_render`)."""
    if isinstance(value, list) and value and all(
            isinstance(b, dict) and isinstance(b.get("type"), str) for b in value) and \
            any(b["type"] != "text" for b in value):
        return list(value)
    return default_render(value)


# an id followed by what ends a JSON value: a number cut short (`"id": 1` of 12) is no id
_ID = re.compile(r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*[,}\]]')
_LONE_SURROGATE = re.compile(
    "[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")


_TOO_DEEP = "JSON nested too deeply to parse"


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


async def _relay(source: Any, sink: Any, ended: asyncio.Event,
                 recover: Callable[[Exception], list[Any]]) -> None:
    """Forward the transport's messages to the session; set `ended` when they stop. A line
    the transport could not parse arrives as an exception: `recover` makes it the messages
    to deliver (none, one, or one per call a batch answered)."""
    try:
        async with sink:
            async for message in source:
                if isinstance(message, Exception):
                    for recovered in recover(message):     # never raises
                        await sink.send(recovered)
                    continue
                await sink.send(message)
            ended.set()             # before the session sees its stream close (`_value`)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        ended.set()


async def _first(*waits: Any) -> None:
    """Wait until the first of the coroutines `waits` returns; cancel the others."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _fail(future: asyncio.Future[None], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


@contextlib.asynccontextmanager
async def connect_servers(
    commands: Sequence[str | Sequence[str]],
    *,
    startup_timeout_s: float = 20.0,
    call_timeout_s: float = 60.0,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    urls: Sequence[str] = (),
) -> AsyncIterator[list[McpServer]]:
    """Connect to several servers at once; close them all on exit (`AsyncExitStack`).

    Args:
        commands: one command per server (a string is split with `shlex`).
        startup_timeout_s, call_timeout_s, cwd, env: as for `McpServer.connect`, per server.
        urls: streamable-HTTP endpoints of servers already running (`McpServer.connect_url`).
    Yields:
        the servers, in the order of `commands` then `urls`; `[d for s in servers for d in
        s.definitions]` are the tools (names are not prefixed: two servers offering the same
        name fail when both are registered on one session).
    Raises:
        McpStartError: the first command (in order) that failed; the servers that did start
            are closed before it propagates.
    """
    async with contextlib.AsyncExitStack() as stack:
        outcomes = await asyncio.gather(
            *(McpServer.connect(c, startup_timeout_s=startup_timeout_s,
                                call_timeout_s=call_timeout_s, cwd=cwd, env=env)
              for c in commands),
            *(McpServer.connect_url(u, startup_timeout_s=startup_timeout_s,
                                    call_timeout_s=call_timeout_s)
              for u in urls),
            return_exceptions=True)
        servers: list[McpServer] = []
        for outcome in outcomes:
            if isinstance(outcome, McpServer):
                stack.push_async_callback(outcome.aclose)
                servers.append(outcome)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        yield servers
