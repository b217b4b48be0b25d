"""MCP servers as pipeline tools: one connection's lifetime and its calls (docs/design.md
§1, §2).

`McpServer.connect(command)` starts a server process, performs the MCP handshake, lists its
tools and turns each into a `ToolDefinition` whose body sends `tools/call` to that server.
`McpServer.connect_url(url)` does the same for a server already listening on streamable HTTP.
`servers.connect_servers([...], urls=[...])` connects several and closes them all on exit.

Tool lists that change. On the server's `notifications/tools/list_changed` the client lists
its tools again (`listing`: every page, within bounds) and tells `on_tools_changed`'s
listeners; a call whose server sent the notification before its answer returns once the new
listing is in place.

Ownership. The MCP SDK's transport and session are anyio contexts (cancel scopes and task
groups) that must be entered and exited by one task. Each `McpServer` therefore runs a
dedicated *owner task* that enters `stdio_client` and `ClientSession`, reports readiness, and
then waits for `aclose()` to ask it to leave; tool calls from any other task of the same
event loop go through the `ClientSession` object (requests are correlated by id, so calls
may overlap). Nothing else enters or exits those contexts.

A message that cannot be parsed (`recovery`) fails the handshake and the tool listing as it
fails a call: start-up fails at once (`McpStartError`) instead of waiting out
`startup_timeout_s`.

The rest of the client, each in its module: the process, streams and stderr (`transport`),
the lines the SDK cannot parse (`recovery`), what an answer becomes (`answers`, `values`),
the error tree (`errors`; its names are re-exported here).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

import anyio
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, ToolListChangedNotification

from codemode.pipeline import RunContext, ToolDefinition

from .answers import answer
from .errors import (
    McpCallTimeout,
    McpError,
    McpProtocolError,
    McpServerDied,
    McpStartError,
    McpToolError,
)
from .listing import list_all_tools, tool_definition
from .recovery import recover
from .transport import (
    STDERR_TAIL_BYTES,
    argv_of,
    default_name,
    http_transport,
    relay,
    stderr_capture,
    stderr_tail,
    stdio_transport,
)

__all__ = [
    "IDEMPOTENCY_META_KEY",
    "McpCallTimeout",
    "McpError",
    "McpProtocolError",
    "McpServer",
    "McpServerDied",
    "McpStartError",
    "McpToolError",
]

IDEMPOTENCY_META_KEY = "codemode/idempotencyKey"
"""The `_meta` key of a `tools/call` request that carries the call's idempotency key (a
sub-call's `"<run id>:<n>"`, the same when the run is replayed after a pause)."""

_log = logging.getLogger("codemode.mcp")

_CLOSE_TIMEOUT_S = 10.0  # the SDK's own shutdown is bounded by ~6 s (stdin close, TERM, KILL)


class _StartFailure(Exception):
    """Owner task -> `connect`: why the start failed (becomes an `McpStartError`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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
            `readOnlyHint: true`; replaced by a new list after each listing that a
            `notifications/tools/list_changed` brought (`on_tools_changed`).
        tools: the MCP `Tool` objects as listed (replaced likewise).
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
        self._listeners: list[Callable[[McpServer], None]] = []
        self._stale = asyncio.Event()      # a list_changed arrived: list again
        self._current = asyncio.Event()    # the listing answers every list_changed so far
        self._current.set()

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
        argv = argv_of(command)
        server = cls(name=name or default_name(argv), command=argv,
                     call_timeout_s=call_timeout_s, stderr=stderr_capture())
        transport = stdio_transport(argv, env=env, cwd=cwd, stderr=server._stderr)
        return await server._start(transport, startup_timeout_s)

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

        if not startup_timeout_s > 0 or not call_timeout_s > 0:
            raise ValueError("startup_timeout_s and call_timeout_s must be positive")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"not an http(s) URL: {url!r}")
        server = cls(name=name or parts.netloc, command=(url,), call_timeout_s=call_timeout_s,
                     stderr=stderr_capture())
        return await server._start(http_transport(url), startup_timeout_s)

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
        return stderr_tail(self._stderr, limit_bytes)

    async def _own(self, transport: Callable[[], Any], ready: asyncio.Future[None]) -> None:
        """The owner task: enters and exits every SDK context of this connection
        (`transport()` is the SDK's stdio or streamable-HTTP client context).

        Messages from the server pass through `transport.relay`, which notices the end of the
        server's stdout; the task then leaves at once (the process has exited or is about
        to), so `alive` turns false without waiting for a call to fail.
        """
        try:
            async with transport() as (read, write):
                relayed, inbox = anyio.create_memory_object_stream[Any](0)
                ended = self._ended
                async with anyio.create_task_group() as relays:
                    relays.start_soon(relay, read, relayed, ended, self._recover)
                    async with ClientSession(inbox, write,
                                             message_handler=self._on_message) as session:
                        try:
                            init, tools = await self._handshake(session)
                        except Exception as exc:
                            _fail(ready, _StartFailure(_describe(exc)))
                            relays.cancel_scope.cancel()
                            return
                        self.server_info = init.server_info
                        self._set_tools(tools)
                        self._session = session
                        _settle(ready)
                        await _first(self._stop.wait(), ended.wait(), self._relist(session))
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
        it at once (`recovery.fail_in_flight`), as it fails a call.

        Raises:
            McpProtocolError: such a message arrived first; else what the SDK raised."""
        async def both() -> tuple[Any, list[Any]]:
            return (await session.initialize(),
                    await list_all_tools(session, server=self.name))

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

    def on_tools_changed(self, listener: Callable[[McpServer], None]) -> Callable[[], None]:
        """Call `listener(server)` after each new listing the server's
        `notifications/tools/list_changed` brought (`definitions` and `tools` are then the
        new ones). Listeners run on the event loop, in the order added; one that raises is
        logged and the others still run. Returns an idempotent disposer."""
        self._listeners.append(listener)

        def dispose() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return dispose

    async def _on_message(self, message: Any) -> None:
        """The SDK session's message handler (its read loop awaits it: never block)."""
        if isinstance(message, ToolListChangedNotification):
            self._current.clear()
            self._stale.set()

    async def _relist(self, session: ClientSession) -> None:
        """While the session is open: list the tools again after each list_changed (one
        listing answers every notification that came before it started), take the new
        listing and tell the listeners. A listing that fails (a timeout of
        `call_timeout_s`, a looping cursor) keeps the tools as they were, and is logged."""
        while True:
            await self._stale.wait()
            self._stale.clear()
            try:
                tools = await asyncio.wait_for(list_all_tools(session, server=self.name),
                                               self.call_timeout_s)
            except Exception as exc:
                _log.warning("MCP server %r: listing its changed tools failed: %s",
                             self.name, _describe(exc))
            else:
                self._set_tools(tools)
                for listener in tuple(self._listeners):
                    try:
                        listener(self)
                    except Exception:
                        _log.exception("MCP server %r: a tools-changed listener raised",
                                       self.name)
            if not self._stale.is_set():
                self._current.set()

    async def _listed(self) -> None:
        """Wait (at most `call_timeout_s`) until the listing answers every list_changed
        received so far, so that a call whose server changed its tools before answering
        returns once the new tools are in place."""
        if self._current.is_set() or not self.alive:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_first(self._current.wait(), self._ended.wait()),
                                   self.call_timeout_s)

    def _set_tools(self, tools: list[Any]) -> None:
        """Take a listing: the tools, their definitions, which values are envelopes."""
        definitions, wrapped = [], set()
        for mcp_tool in tools:
            definition, envelope = tool_definition(mcp_tool, self._call_from, self.name)
            definitions.append(definition)
            if envelope:
                wrapped.add(definition.name)
        self.tools, self.definitions, self._wrapped = list(tools), definitions, wrapped

    async def _call_from(self, tool_name: str, args: dict[str, Any], ctx: RunContext) -> Any:
        return await self.call(tool_name, args, signal=ctx.signal, media=ctx.defer_context,
                               idempotency_key=ctx.idempotency_key)

    async def call(self, tool_name: str, arguments: Mapping[str, Any] | None = None, *,
                   idempotency_key: str | None = None,
                   signal: Any = None, timeout_s: float | None = None,
                   media: Callable[[list[dict[str, Any]]], None] | None = None) -> Any:
        """Send one `tools/call` and return the value a program receives (`answers`). When
        the server sent `notifications/tools/list_changed` before answering, the value is
        returned once the new listing is in place (or `call_timeout_s` has passed).

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
            await self._listed()
            return answer(tool_name, request, server=self.name,
                          wrapped=tool_name in self._wrapped,
                          ended=self._ended.is_set() or self._stop.is_set(),
                          died=self._died, media=media)
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

    def _recover(self, exc: Exception) -> list[SessionMessage]:
        """What to deliver for a line of stdout the SDK could not parse (`recovery.recover`:
        never raises; a broken line may fail the calls in flight instead)."""
        return recover(exc, server=self.name, in_flight=self._in_flight)


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
