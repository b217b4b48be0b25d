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

While a call runs, each of its sub-calls is reported as a `notifications/message` (logger
"codemode", level info, warning when it failed; data `{"callId", "tool", "ok",
"durationMs", "code"?, "message"?}`) and, when the request carried a progress token, as a
`notifications/progress` (progress counts notifications; the message names the sub-call);
a heartbeat progress notification follows every `progress_interval_s` of a long run. All
of them are sent before the result.

Approval. A call a `tools/pre-execute` listener answers with `Ask` (a policy's `ask` rule)
is put to the MCP client as a form elicitation naming the tool and its arguments, with one
boolean field `approve`: accepted with `approve: true` runs the call once; `false` or a
decline denies it; a cancel, or no answer within `approval_timeout_s`, cancels it. A client
that cannot be asked (no `elicitation` capability, or a connection that carries no server
requests) gets a denial saying so, without a request being sent.

Pausing (`approvals`): with "auto", a program's sub-call that asks, from a client that
cannot be asked, pauses the run instead (docs/codemode.md "Pausing for approval"); with
"defer", every such sub-call does, and nobody is elicited. A paused `run_code` succeeds with
`structuredContent` `{"status": "pending", "run_id", "approvals": [{"id", "toolName",
"arguments", "reason"?}], "logs", "stderr"?, "subcalls", "labels"?}`, and the tool `resume_run`
(`{"run_id", "approve": [id], "deny": [{"id", "reason"?}]}`, listed only then) resumes it
with `Session.resume`, answering as `run_code` does. Whoever calls `resume_run` approves:
a client must keep it away from its model. A direct call (mode "both") that asks is never
paused: it is elicited or denied as above.

Turns. The server keeps one turn of the session open while it serves (opened by the first
call, closed by `close()`); each MCP call is one step of it, so concurrent calls from one
or several clients share the approval channel and the log.
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
from mcp.server.connection import allowed_log_levels
from mcp.server.lowlevel import Server
from pydantic import TypeAdapter

from codemode.pipeline import (
    ApprovalDecision,
    ApprovalRequest,
    Ask,
    CallResult,
    Deny,
    Execution,
    ResumeError,
    Session,
    thaw,
)
from codemode.pipeline._resume import find_suspension
from codemode.sandbox import SandboxLimits

from .._policy.policy import Policy
from .._run.run_code import RUN_CODE, RUN_CODE_PARAMETERS, CodeMode
from .._version import codemode_version
from .calls import CallIndex
from .toolsets import gather_tools

__all__ = ["RESUME_RUN", "RESUME_RUN_PARAMETERS", "RUN_CODE_OUTPUT_SCHEMA", "Approvals",
           "CodeModeServer", "ServeMode", "open_server", "serve"]

_log = logging.getLogger("codemode.serve")

ServeMode = Literal["code", "both"]
Approvals = Literal["elicit", "auto", "defer"]
"""How the server gets a sub-call's approval: "elicit" asks the client (a client that
cannot be asked gets a denial); "auto" asks it when it can, else pauses the run; "defer"
always pauses the run. Pausing lists `resume_run`."""

RESUME_RUN = "resume_run"

RESUME_RUN_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "run_id": {"type": "string",
                   "description": "The paused run's id (run_id of the pending result)."},
        "approve": {"type": "array", "items": {"type": "string"},
                    "description": "Ids of the requests to approve."},
        "deny": {"type": "array", "description": "The requests to deny.",
                 "items": {"type": "object",
                           "properties": {"id": {"type": "string"},
                                          "reason": {"type": "string"}},
                           "required": ["id"], "additionalProperties": False}},
    },
    "required": ["run_id"],
    "additionalProperties": False,
}
"""The `inputSchema` of `resume_run`: every pending request must be approved or denied."""

_RESUME_DESCRIPTION = (
    "Resume a run_code run that paused for approval (its result has status \"pending\"): "
    "approve or deny each request it waits on, by id. The program goes on where it stopped "
    "(its earlier tool calls are not run again) and the result is that of run_code. Whoever "
    "calls this tool approves the requests: it is for the person or application that "
    "decides, not for the model.")

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

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve",
                               "description": "true runs this call once; false denies it"}},
    "required": ["approve"],
}
"""The form an approval elicitation asks the client to fill in."""

LOGGER_NAME = "codemode"
"""The `logger` of the server's `notifications/message`."""

_INSTRUCTIONS = ("Call run_code with a Python program. Inside the program every tool listed "
                 "in run_code's description is a plain function; print() what you want to "
                 "see and end with an expression to return a value.")
_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical",
                            "alert", "emergency")
_CONTENT = TypeAdapter[Any](types.ContentBlock)
_SEND_TIMEOUT_S = 10.0       # a client that stops reading cannot hold a call's result back


class _McpCall:
    """One `tools/call` request being served: its context and the notifications it sends.

    Notifications are queued synchronously (pipeline observers are synchronous) and sent in
    order by one task, which `close()` drains before the result is returned.
    """

    def __init__(self, ctx: Any, server: CodeModeServer) -> None:
        self.ctx = ctx
        self._server = server
        self._queue: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue()
        self._progress = 0
        self._subcalls = 0
        self._started_s = time.monotonic()
        meta = ctx.meta or {}
        self.wants_progress = meta.get("progress_token", meta.get("progressToken")) is not None
        self._sender = asyncio.ensure_future(self._send_all())
        self._ticker: asyncio.Future[None] | None = None
        if self.wants_progress and server.progress_interval_s is not None:
            self._ticker = asyncio.ensure_future(self._tick(server.progress_interval_s))

    # ---- what can be asked -----------------------------------------------------------

    def cannot_elicit(self) -> str | None:
        """Why this client cannot be asked for approval, or None when it can."""
        session = self.ctx.session
        capabilities = session.client_capabilities
        if capabilities is None or capabilities.elicitation is None:
            return ("the MCP client did not declare the elicitation capability, "
                    "so it cannot be asked")
        elicitation = capabilities.elicitation
        if elicitation.form is None and elicitation.url is not None:
            return "the MCP client accepts only URL elicitations, not forms"
        if not session.can_send_request:
            return (f"this MCP connection (protocol {session.protocol_version}) cannot carry "
                    "a request from the server to the client")
        return None

    async def elicit(self, message: str) -> Any:
        return await self.ctx.session.elicit_form(message, APPROVAL_SCHEMA,
                                                  related_request_id=self.ctx.request_id)

    # ---- notifications ----------------------------------------------------------------

    def report_subcall(self, execution: Execution, result: CallResult,
                       duration_ms: float | None) -> None:
        self._subcalls += 1
        data: dict[str, Any] = {"callId": execution.call_id, "tool": execution.name,
                                "ok": not result.is_error}
        if duration_ms is not None:
            data["durationMs"] = round(duration_ms, 1)
        if result.is_error and result.error is not None:
            data["code"] = ("DENIED" if result.denied else
                            result.error.code if result.error.code is not None else "TOOL_ERROR")
            data["message"] = result.error.message
        self._queue.put_nowait(("log", data))
        outcome = "ok" if not result.is_error else data["code"]
        took = f", {duration_ms:.0f} ms" if duration_ms is not None else ""
        self._queue.put_nowait(("progress", f"{execution.name}: {outcome}{took}; "
                                            f"{self._subcalls} tool call(s) done"))

    async def _tick(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            elapsed = time.monotonic() - self._started_s
            self._queue.put_nowait(("progress", f"running for {elapsed:.0f} s; "
                                                f"{self._subcalls} tool call(s) done"))

    async def _send_all(self) -> None:
        while (item := await self._queue.get()) is not None:
            kind, payload = item
            try:
                if kind == "log":
                    await asyncio.wait_for(self._send_log(payload), _SEND_TIMEOUT_S)
                elif self.wants_progress:
                    self._progress += 1
                    await asyncio.wait_for(
                        self.ctx.session.report_progress(self._progress, None, payload),
                        _SEND_TIMEOUT_S)
            except Exception:            # a notification is advisory: never fail the call
                _log.debug("could not send a %s notification", kind, exc_info=True)

    async def _send_log(self, data: dict[str, Any]) -> None:
        level = "info" if data["ok"] else "warning"
        allowed = allowed_log_levels(self.ctx.protocol_version, self.ctx.meta)
        if level not in allowed or _LEVELS.index(level) < _LEVELS.index(self._server.log_level):
            return
        notification = types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(level=level, logger=LOGGER_NAME,
                                                          data=data))
        await self.ctx.session.send_notification(notification,
                                                 related_request_id=self.ctx.request_id)

    async def close(self) -> None:
        """Stop the heartbeat and send what is queued (bounded by `_SEND_TIMEOUT_S` each)."""
        if self._ticker is not None:
            self._ticker.cancel()
        self._queue.put_nowait(None)
        try:
            await asyncio.shield(self._sender)
        except asyncio.CancelledError:
            self._sender.cancel()
            raise


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
        approvals: "elicit", "auto" or "defer" (`Approvals`; the module docstring). With
            "auto" and "defer", runs record their clocks and randomness so that a paused
            run replays exactly, and `resume_run` is listed.
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
                 approvals: Approvals = "elicit") -> None:
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
        self.progress_interval_s = progress_interval_s
        self.log_level = "info"
        self._calls: dict[str, _McpCall] = {}        # root call id -> the request it serves
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
        self.server: Server[Any] = Server(
            name, version=codemode_version(), instructions=_INSTRUCTIONS,
            on_list_tools=self._list_tools, on_call_tool=self._call_tool)
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
            tools.append(types.Tool(name=RESUME_RUN, description=_RESUME_DESCRIPTION,
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
        return types.ListToolsResult(tools=self.tools())

    async def _set_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self.log_level = params.level
        return types.EmptyResult()

    async def _call_tool(self, ctx: Any,
                         params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == RESUME_RUN and self.approvals != "elicit":
            return await self._resume_run(ctx, params.arguments or {})
        call_id = f"mcp_{uuid.uuid4().hex[:16]}"
        call = _McpCall(ctx, self)
        self._calls[call_id] = call
        try:
            if not self.session.turn_open:
                self.session.begin_turn()
            result = await self.session.call(params.name, params.arguments or {},
                                             agent=self.agent, call_id=call_id)
        except Exception as exc:          # the pipeline itself failed: still an answer
            _log.exception("tools/call %r failed in the host", params.name)
            result = CallResult.failure(f"the call failed in the server: "
                                        f"{type(exc).__name__}: {exc}")
        finally:
            del self._calls[call_id]
            await call.close()
        return self._mcp_result(params.name, result)

    async def _resume_run(self, ctx: Any, arguments: dict[str, Any]) -> types.CallToolResult:
        """`resume_run`: `Session.resume` with the decisions given; a request left
        undecided, an unknown or already resumed run is an error result."""
        try:
            run_id, decisions = _resume_arguments(arguments)
            _, resumed = find_suspension(self.session.log.read(), run_id)
        except ResumeError as exc:
            return types.CallToolResult(content=[types.TextContent(type="text",
                                                                   text=f"Error: {exc}")],
                                        is_error=True)
        call_id = f"{run_id}:resume:{resumed + 1}"       # the id Session.resume gives it
        if call_id in self._calls:
            return types.CallToolResult(content=[types.TextContent(
                type="text", text=f"Error: run {run_id!r} is being resumed by another call")],
                is_error=True)
        call = _McpCall(ctx, self)
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
            why = call.cannot_elicit() if call is not None else None
            if execution.parent is not None and call is not None and (
                    self.approvals == "defer" or (self.approvals == "auto" and why)):
                return Ask(decision.reason, defer=True)     # the run pauses for it
            if why is not None:
                asked = f" ({decision.reason})" if decision.reason else ""
                return Deny(f'tool "{execution.name}" requires approval{asked}, but {why}')
        return decision

    async def _answer(self, request: ApprovalRequest, next: Callable[[], Any]) -> Any:
        started = self._index.get(request.call_id)
        call = self._calls.get(started.root_call_id) if started is not None else None
        if call is None or started is None:
            return await next()
        if call.cannot_elicit() is not None:
            return "unavailable"
        arguments = json.dumps(thaw(started.arguments), ensure_ascii=False, indent=2)
        message = (f'Approve the tool call "{request.tool_name}" with these arguments?\n'
                   f"{arguments}")
        if request.reason:
            message += f"\nReason: {request.reason}"
        try:
            answer = await asyncio.wait_for(call.elicit(message), self.approval_timeout_s)
        except TimeoutError:
            return "cancelled"
        except Exception:
            _log.warning("the approval elicitation for %r failed", request.tool_name,
                         exc_info=True)
            return "unavailable"
        if answer.action == "accept":
            approved = (answer.content or {}).get("approve") is True
            return "allowed-once" if approved else "rejected"
        return "rejected" if answer.action == "decline" else "cancelled"

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


def _resume_arguments(arguments: dict[str, Any]) -> tuple[str, list[ApprovalDecision]]:
    """`resume_run`'s arguments as (run id, decisions).

    Raises:
        ResumeError: they do not have the shape of `RESUME_RUN_PARAMETERS`.
    """
    run_id = arguments.get("run_id")
    approve = arguments.get("approve", [])
    deny = arguments.get("deny", [])
    if not isinstance(run_id, str) or not isinstance(approve, list) or \
            not isinstance(deny, list) or not all(isinstance(a, str) for a in approve) or \
            not all(isinstance(d, dict) and isinstance(d.get("id"), str)
                    and isinstance(d.get("reason", ""), str) for d in deny):
        raise ResumeError('resume_run takes {"run_id": str, "approve": [id], '
                          '"deny": [{"id": id, "reason"?: str}]}')
    decisions = [ApprovalDecision(id=a, approved=True) for a in approve]
    for denial in deny:
        reason = denial.get("reason")
        decisions.append(ApprovalDecision(id=denial["id"], approved=False, reason=reason)
                         if reason else ApprovalDecision(id=denial["id"], approved=False))
    return run_id, decisions


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
                      builtin: bool = False, policy: Policy | None = None,
                      log: str | Path | None = None, mode: ServeMode = "code",
                      call_timeout_s: float = 60.0,
                      progress_interval_s: float | None = 1.0,
                      approvals: Approvals = "elicit") -> AsyncIterator[CodeModeServer]:
    """Connect the upstream servers, open the session and its log, build the server; undo
    it all on exit (what `codemode serve` runs).

    Args:
        mcp: commands of upstream MCP servers over stdio (split with `shlex`).
        mcp_urls: streamable-HTTP endpoints of upstream MCP servers.
        builtin: also register the demo toolset (`codemode.fixtures.toolset`).
        policy: the policy to apply (tier, limits, exposed tools, rules).
        log: the session log (`.db`/`.sqlite` SQLite, `.jsonl` JSONL; None: in memory).
        mode, progress_interval_s, approvals: as for `CodeModeServer`.
        call_timeout_s: seconds each upstream `tools/call` may take.
    Raises:
        McpStartError: an upstream server did not start (the others are closed).
        PolicyError: the policy's `expose` matches none of the tools.
    """
    async with AsyncExitStack() as stack:
        tools = await gather_tools(stack, builtin=builtin, mcp=mcp, mcp_urls=mcp_urls,
                                   call_timeout_s=call_timeout_s)
        session = Session(tools=tools, log=str(log) if log is not None else None)
        stack.callback(session.log.close)
        server = CodeModeServer(session, mode=mode, policy=policy,
                                progress_interval_s=progress_interval_s, approvals=approvals)
        stack.callback(server.close)
        yield server


def serve(*, transport: Literal["stdio", "http"] = "stdio", host: str = "127.0.0.1",
          port: int = 8000, **options: Any) -> None:
    """Run `codemode serve` until the client leaves (stdio) or the process is interrupted
    (http). `options` go to `open_server`. The HTTP endpoint is announced on stderr as
    `codemode: serving MCP at <url>`; stdout belongs to the MCP stream under stdio.

    Raises:
        McpStartError, PolicyError, OSError: as `open_server` and `CodeModeServer.run_http`.
    """
    async def main() -> None:
        async with open_server(**options) as server:
            if transport == "stdio":
                await server.run_stdio()
            else:
                await server.run_http(host, port, ready=lambda url: print(
                    f"codemode: serving MCP at {url}", file=sys.stderr, flush=True))

    asyncio.run(main())
