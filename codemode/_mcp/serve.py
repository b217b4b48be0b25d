"""A session's `run_code` as an MCP server (`codemode serve`, docs/integrations.md).

`CodeModeServer(session)` puts `run_code` on the session (or applies a `Policy`, which does)
and answers MCP requests with the SDK's low-level `Server`:

    tools/list   `run_code`, described by `CodeMode.description()` (the typed stubs of every
                 exposed tool), with `RUN_CODE_OUTPUT_SCHEMA`; with mode "both", also every
                 exposed tool (its inputSchema, and its output schema when that is an object)
    tools/call   `session.call(name, arguments, agent=...)`: the whole pipeline, logged like
                 any call; the result's content as MCP content blocks and, for `run_code` and
                 tools with an object output schema, the value as `structuredContent`.
                 A failure is `isError: true` with the pipeline's text; nothing a tool or an
                 upstream server does ends the server.

Changes. When what `tools/list` answers changes (an upstream server's tools changed, so
`run_code`'s description did), each client that has listed or called tools gets
`notifications/tools/list_changed` (`changes`).

Turns. The server keeps one turn of the session open while it serves (opened by the first
call, closed by `close()`); each MCP call is one step of it, so concurrent calls from one
or several clients share the approval channel and the log.

The rest of the server, each in its module: the notifications a call sends while it runs
(`progress`), approval by elicitation and pausing (`approvals`), one elicitation for a
program's whole plan (`plan_approvals`, `approve_plans`), the `resume_run` tool that
resumes a paused run (`resume`), and what the approvals need of the calls in flight
(`calls`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import mcp_types as types
from mcp.server.lowlevel import Server
from pydantic import TypeAdapter

from codemode.pipeline import (
    ApprovalRequest,
    Ask,
    CallResult,
    Execution,
    ResumeError,
    Session,
    ToolDefinition,
    thaw,
)
from codemode.pipeline.log import MemoryLog
from codemode.sandbox import SandboxLimits

from .._policy.policy import Policy
from .._run.run_code import RUN_CODE, RUN_CODE_PARAMETERS, CodeMode
from .._version import codemode_version
from .approvals import Approvals, ask_client, on_ask
from .calls import CallIndex
from .changes import ListChanges
from .plan_approvals import plan_first
from .progress import McpCall
from .resume import (
    RESUME_DESCRIPTION,
    RESUME_RUN,
    RESUME_RUN_PARAMETERS,
    check_approval_token,
    resume_target,
    token_refusal,
)
from .toolsets import gather_tools

__all__ = ["RESUME_RUN", "RESUME_RUN_PARAMETERS", "RUN_CODE_OUTPUT_SCHEMA", "Approvals",
           "CodeModeServer", "ServeMode", "open_server", "serve"]

_log = logging.getLogger("codemode.serve")

ServeMode = Literal["code", "both"]

RUN_CODE_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "logs": {"type": "array", "items": {"type": "string"},
                 "description": "What the program printed, line by line (newlines kept)."},
        "result": {"description": "The value of the program's last expression; absent when "
                                  "it did not end with an expression."},
        "stderr": {"type": "string", "description": "What the program wrote to stderr."},
        "subcalls": {
            "type": "object",
            "description": "Counts over the program's tool calls.",
            "properties": {
                "total": {"type": "integer"},
                "failed": {"type": "integer"},
                "denied": {"type": "integer"},
                "by_tool": {"type": "object", "additionalProperties": {"type": "integer"}},
            },
            "required": ["total", "failed", "denied", "by_tool"],
        },
        "status": {"enum": ["pending"],
                   "description": "Present when the run paused, waiting for approval."},
        "run_id": {"type": "string",
                   "description": "A paused run's id: resume_run takes it."},
        "approvals": {
            "type": "array",
            "description": "What a paused run waits on, in call order.",
            "items": {"type": "object",
                      "properties": {"id": {"type": "string"},
                                     "toolName": {"type": "string"},
                                     "arguments": {},
                                     "reason": {"type": "string"}},
                      "required": ["id", "toolName", "arguments"]},
        },
        "labels": {
            "type": "object",
            "description": "The labels the run holds (the union of those of every result "
                           "it received), each with the sub-call ids that brought it; "
                           "absent when it holds none.",
            "additionalProperties": {"type": "array", "items": {"type": "string"}},
        },
    },
    "required": ["logs", "subcalls"],
}
"""The `outputSchema` of `run_code` and `resume_run`: their value on success, completed or
paused (docs/codemode.md)."""

_INSTRUCTIONS = ("Call run_code with a Python program. Inside the program every tool listed "
                 "in run_code's description is a plain function; print() what you want to "
                 "see and end with an expression to return a value.")
_CONTENT = TypeAdapter[Any](types.ContentBlock)


class CodeModeServer:
    """Serves one session's `run_code` (and, with mode "both", its tools) over MCP.

    Args:
        session: the session whose pipeline governs every call; an approval channel is
            mounted on it when it has none (`mount_approval("ask")`).
        mode: "code" lists only `run_code` (other names fail `UNKNOWN_TOOL`, as the session's
            code mode says); "both" lists the exposed tools too and lets them be called
            directly.
        policy: applied after the server's own listeners, so the server sees every decision
            (default: `CodeMode(session, limits=limits)`).
        limits: the run limits when there is no policy (default: `SandboxLimits()`).
        name: the server name given in the MCP handshake.
        agent: the agent every MCP call runs as (approval needs one).
        approval_timeout_s: seconds a client may take to answer an approval (> 0).
        approvals: "elicit", "auto" or "defer" (`Approvals`; `approvals`). With
            "auto" and "defer", runs record their clocks and randomness so that a paused
            run replays exactly, and `resume_run` is listed.
        approval_token: the secret a `resume_run` request must carry in its `_meta`
            (`resume.APPROVAL_TOKEN_META`) to decide anything; None: `resume_run` refuses
            every decision (`resume.token_refusal`).
        approve_plans: dry-run each `run_code` program first and put every call its plan
            asks about to the client in one elicitation (`plan_approvals`); a client that
            cannot be asked gets what `approvals` says.

    Raises:
        ValueError: a bad mode, approvals or timeout; `ApprovalTokenError` (a ValueError)
            for an approval token of fewer than 32 characters or 10 different ones.
        progress_interval_s: seconds between heartbeat progress notifications of a long call
            (None: only one per sub-call).

    Attributes:
        server: the SDK's low-level `Server` (run it over any transport).
        code_mode: the `CodeMode` that reserved `run_code`.

    Register other `tools/pre-execute` listeners after creating the server: an `Ask` from a
    listener registered before it reaches the client only through the approval answerer,
    which cannot say why a client that cannot be asked was not.
    """

    def __init__(self, session: Session, *, mode: ServeMode = "code",
                 policy: Policy | None = None, limits: SandboxLimits | None = None,
                 name: str = "codemode", agent: str = "mcp-client",
                 approval_timeout_s: float = 600.0,
                 progress_interval_s: float | None = 1.0,
                 approvals: Approvals = "elicit",
                 approval_token: str | None = None, approve_plans: bool = False) -> None:
        if mode not in ("code", "both"):
            raise ValueError(f"mode must be 'code' or 'both', not {mode!r}")
        if approvals not in ("elicit", "auto", "defer"):
            raise ValueError(f"approvals must be 'elicit', 'auto' or 'defer', not {approvals!r}")
        if not approval_timeout_s > 0:
            raise ValueError("approval_timeout_s must be positive")
        if progress_interval_s is not None and not progress_interval_s > 0:
            raise ValueError("progress_interval_s must be positive or None")
        self.session = session
        self.mode = mode
        self.agent = agent
        self.approval_timeout_s = approval_timeout_s
        self.approvals = approvals
        self.approve_plans = approve_plans
        self._approval_token = (check_approval_token(approval_token)
                                if approval_token is not None else None)
        self.progress_interval_s = progress_interval_s
        self.log_level = "info"
        self._calls: dict[str, McpCall] = {}        # root call id -> the request it serves
        self._index = CallIndex(session)
        self._disposers: list[Callable[[], None]] = [
            self._index.close,
            session.on("tools/pre-execute", self._pre_execute),
            session.on("approval/answer", self._answer),
            session.on("tools/result", self._observe),
            session.set_mode(mode, agent=agent),
        ]
        if session.approval is None:
            self._disposers.append(session.mount_approval("ask"))
        self.code_mode = (policy.apply(session) if policy is not None
                          else CodeMode(session, limits=limits))
        if approvals != "elicit":
            self.code_mode.resumable = True
        self._disposers.append(self.code_mode.close)
        self.server: Server[Any] = _Server(
            name, version=codemode_version(), instructions=_INSTRUCTIONS,
            on_list_tools=self._list_tools, on_call_tool=self._call_tool)
        self._changes = ListChanges(self.tools)
        self._disposers.append(session.on("tools/changed", self._changes.changed))
        # Declares the logging capability; the level filters the sub-call messages.
        self.server.add_request_handler("logging/setLevel", types.SetLevelRequestParams,
                                        self._set_level)

    def close(self) -> None:
        """Close the open turn and remove what the server installed on the session."""
        if self.session.turn_open:
            self.session.end_turn()
        for dispose in reversed(self._disposers):
            dispose()
        self._disposers.clear()

    # ---- MCP handlers -------------------------------------------------------------------

    def tools(self) -> list[types.Tool]:
        """What `tools/list` answers."""
        tools = [types.Tool(name=RUN_CODE, description=self.code_mode.description(self.agent),
                            input_schema=RUN_CODE_PARAMETERS,
                            output_schema=RUN_CODE_OUTPUT_SCHEMA,
                            annotations=types.ToolAnnotations(title="Run Python code"))]
        if self.approvals != "elicit":
            tools.append(types.Tool(name=RESUME_RUN, description=RESUME_DESCRIPTION,
                                    input_schema=RESUME_RUN_PARAMETERS,
                                    output_schema=RUN_CODE_OUTPUT_SCHEMA,
                                    annotations=types.ToolAnnotations(
                                        title="Resume a paused run")))
        if self.mode == "both":
            for definition in self.code_mode.exposed_tools(self.agent):
                tools.append(types.Tool(name=definition.name,
                                        description=definition.description or None,
                                        input_schema=dict(definition.parameters),
                                        output_schema=_object_schema(definition.output_schema)))
        return tools

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        tools = self.tools()
        self._changes.listed(ctx.session, tools)
        return types.ListToolsResult(tools=tools)

    async def _set_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self.log_level = params.level
        return types.EmptyResult()

    async def _call_tool(self, ctx: Any,
                         params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == RESUME_RUN and self.approvals != "elicit":
            return await self._resume_run(ctx, params.arguments or {}, params.meta)
        call_id = f"mcp_{uuid.uuid4().hex[:16]}"
        call = self._open_call(ctx)
        self._calls[call_id] = call
        self._changes.client(ctx.session)
        try:
            if not self.session.turn_open:
                self.session.begin_turn()
            planned = await plan_first(
                self.code_mode, ctx, params.arguments or {}, agent=self.agent,
                call_id=call_id, timeout_s=self.approval_timeout_s,
            ) if self.approve_plans and params.name == RUN_CODE else None
            result = planned if planned is not None else await self.session.call(
                params.name, params.arguments or {}, agent=self.agent, call_id=call_id)
        except Exception as exc:          # the pipeline itself failed: still an answer
            _log.exception("tools/call %r failed in the host", params.name)
            result = CallResult.failure(f"the call failed in the server: "
                                        f"{type(exc).__name__}: {exc}")
        finally:
            del self._calls[call_id]
            await call.close()
        return self._mcp_result(params.name, result)

    async def _resume_run(self, ctx: Any, arguments: dict[str, Any],
                          meta: Any) -> types.CallToolResult:
        """`resume_run`: `Session.resume` with the decisions given; a request without the
        approval token in `meta` (the request's `_meta`), a request left undecided, an
        unknown or already resumed run is an error result."""
        refused = token_refusal(meta, self._approval_token)
        if refused is not None:
            return types.CallToolResult(content=[types.TextContent(
                type="text", text=f"Error: APPROVAL_TOKEN_REQUIRED: {refused}")], is_error=True)
        try:
            run_id, decisions, call_id = resume_target(self.session, arguments)
        except ResumeError as exc:
            return types.CallToolResult(content=[types.TextContent(type="text",
                                                                   text=f"Error: {exc}")],
                                        is_error=True)
        if call_id in self._calls:
            return types.CallToolResult(content=[types.TextContent(
                type="text", text=f"Error: run {run_id!r} is being resumed by another call")],
                is_error=True)
        call = self._open_call(ctx)
        self._calls[call_id] = call
        try:
            if not self.session.turn_open:
                self.session.begin_turn()
            result = await self.session.resume(run_id, decisions)
        except ResumeError as exc:
            result = CallResult.failure(str(exc), code="RESUME_FAILED")
        except Exception as exc:          # the pipeline itself failed: still an answer
            _log.exception("resume_run %r failed in the host", run_id)
            result = CallResult.failure(f"the call failed in the server: "
                                        f"{type(exc).__name__}: {exc}")
        finally:
            del self._calls[call_id]
            await call.close()
        return self._mcp_result(RUN_CODE, result)

    def _open_call(self, ctx: Any) -> McpCall:
        """The notifications of the request `ctx` (`progress`), at this server's settings."""
        return McpCall(ctx, progress_interval_s=self.progress_interval_s,
                       log_level=lambda: self.log_level)

    def _mcp_result(self, name: str, result: CallResult) -> types.CallToolResult:
        content = [_content_block(block) for block in result.content]
        structured: Any = None
        if not result.is_error:
            schema = (RUN_CODE_OUTPUT_SCHEMA if name == RUN_CODE else
                      next((t.output_schema for t in self.tools() if t.name == name), None))
            value = thaw(result.value)
            if schema is not None and isinstance(value, dict):
                structured = value
        return types.CallToolResult(content=content, structured_content=structured,
                                    is_error=result.is_error)

    # ---- pipeline listeners -------------------------------------------------------------

    async def _pre_execute(self, execution: Execution, next: Callable[[], Any]) -> Any:
        decision = await next()
        if isinstance(decision, Ask):
            call = self._calls.get(execution.root_call_id)
            return on_ask(decision, execution, call.ctx if call is not None else None,
                          self.approvals)
        return decision

    async def _answer(self, request: ApprovalRequest, next: Callable[[], Any]) -> Any:
        started = self._index.get(request.call_id)
        call = self._calls.get(started.root_call_id) if started is not None else None
        if call is None or started is None:
            return await next()
        return await ask_client(call.ctx, request, started.arguments, self.approval_timeout_s)

    def _observe(self, execution: Execution, result: CallResult) -> None:
        call = self._calls.get(execution.root_call_id)
        if execution.parent is None or call is None:
            return
        started = self._index.get(execution.call_id)
        duration_ms = ((time.monotonic() - started.started_s) * 1000
                       if started is not None else None)
        call.report_subcall(execution, result, duration_ms)

    # ---- transports ---------------------------------------------------------------------

    async def run_stdio(self) -> None:
        """Serve one client over this process's stdin and stdout until stdin closes."""
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())

    async def run_http(self, host: str = "127.0.0.1", port: int = 8000, *,
                       path: str = "/mcp", ready: Callable[[str], None] | None = None) -> None:
        """Serve streamable HTTP at `http://host:port/path` until interrupted (SIGINT or
        SIGTERM end it cleanly).

        Args:
            host: the address to bind (loopback by default; loopback hosts get the SDK's
                DNS-rebinding protection).
            port: the TCP port; 0 picks a free one.
            ready: called with the endpoint URL once the socket listens.
        Raises:
            OSError: the address cannot be bound.
        """
        import uvicorn

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen(128)
            bound = sock.getsockname()[1]
            app = self.server.streamable_http_app(streamable_http_path=path, host=host)
            config = uvicorn.Config(app, log_level="warning", lifespan="on")
            served = uvicorn.Server(config)
            shown = f"[{host}]" if family == socket.AF_INET6 else host
            if ready is not None:
                ready(f"http://{shown}:{bound}{path}")
            await served.serve(sockets=[sock])
        finally:
            sock.close()

class _Server(Server[Any]):
    """The SDK's server, declaring `tools.listChanged` (`ListChanges` sends it) on every
    transport (the streamable-HTTP app builds its options itself)."""

    def create_initialization_options(self, notification_options: Any = None,
                                      *args: Any, **kwargs: Any) -> Any:
        from mcp.server.lowlevel import NotificationOptions

        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), *args, **kwargs)


def _object_schema(schema: Any) -> dict[str, Any] | None:
    """An output schema MCP can carry (a JSON object's), else None."""
    if isinstance(schema, dict) and schema.get("type") == "object":
        return dict(thaw(schema))
    return None


def _content_block(block: Any) -> Any:
    """A pipeline content block as an MCP one; a block MCP has no type for becomes JSON text."""
    plain = thaw(block)
    if isinstance(plain, dict) and plain.get("type") == "text":
        return types.TextContent(type="text", text=str(plain.get("text", "")))
    try:
        return _CONTENT.validate_python(plain)
    except Exception:
        return types.TextContent(type="text", text=json.dumps(plain, ensure_ascii=False))




@asynccontextmanager
async def open_server(*, mcp: Sequence[str] = (), mcp_urls: Sequence[str] = (),
                      builtin: bool = False, tools: Sequence[ToolDefinition] = (),
                      policy: Policy | None = None,
                      log: str | Path | None = None, mode: ServeMode = "code",
                      call_timeout_s: float = 60.0,
                      progress_interval_s: float | None = 1.0,
                      approvals: Approvals = "elicit",
                      approval_token: str | None = None,
                      approve_plans: bool = False) -> AsyncIterator[CodeModeServer]:
    """Connect the upstream servers, open the session and its log, build the server; undo
    it all on exit (what `codemode serve` runs).

    Args:
        mcp: commands of upstream MCP servers over stdio (split with `shlex`).
        mcp_urls: streamable-HTTP endpoints of upstream MCP servers.
        builtin: also register the demo toolset (`codemode.fixtures.toolset`).
        tools: more tools to register (`codemode serve --tools MODULE:ATTR`).
        policy: the policy to apply (tier, limits, exposed tools, rules).
        log: the session log (`.db`/`.sqlite` SQLite, `.jsonl` JSONL; None: in memory while
            the server runs, `MemoryLog()`, so a policy's `ask` may pause runs).
        mode, progress_interval_s, approvals, approval_token, approve_plans: as for
            `CodeModeServer`.
        call_timeout_s: seconds each upstream `tools/call` may take.
    Raises:
        McpStartError: an upstream server did not start (the others are closed).
        PolicyError: the policy's `expose` matches none of the tools.
    """
    async with AsyncExitStack() as stack:
        gathered = await gather_tools(stack, builtin=builtin, mcp=mcp, mcp_urls=mcp_urls,
                                      tools=tools, call_timeout_s=call_timeout_s)
        # no file: the log is kept in memory on purpose, as long as the server runs (a run
        # paused for approval is resumed by `resume_run` meanwhile)
        session = Session(tools=gathered.builtin,
                          log=str(log) if log is not None else MemoryLog())
        stack.callback(session.log.close)
        stack.callback(gathered.attach(session))
        server = CodeModeServer(session, mode=mode, policy=policy,
                                progress_interval_s=progress_interval_s, approvals=approvals,
                                approval_token=approval_token, approve_plans=approve_plans)
        stack.callback(server.close)
        yield server


def serve(*, transport: Literal["stdio", "http"] = "stdio", host: str = "127.0.0.1",
          port: int = 8000, **options: Any) -> None:
    """Run `codemode serve` until the client leaves (stdio) or the process is interrupted
    (http): `asyncio.run(serving(...))`.

    Raises:
        McpStartError, PolicyError, OSError: as `open_server` and `CodeModeServer.run_http`.
    """
    asyncio.run(serving(transport=transport, host=host, port=port, **options))


async def serving(*, transport: Literal["stdio", "http"] = "stdio", host: str = "127.0.0.1",
                  port: int = 8000, **options: Any) -> None:
    """What `serve` runs, as a coroutine (the command line runs it in its own event loop,
    which a stop signal cancels). `options` go to `open_server`. The HTTP endpoint is
    announced on stderr as `codemode: serving MCP at <url>`; stdout belongs to the MCP
    stream under stdio.

    Raises:
        McpStartError, PolicyError, OSError: as `open_server` and `CodeModeServer.run_http`.
    """
    async with open_server(**options) as server:
        if transport == "stdio":
            await server.run_stdio()
        else:
            await server.run_http(host, port, ready=lambda url: print(
                f"codemode: serving MCP at {url}", file=sys.stderr, flush=True))
