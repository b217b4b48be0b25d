"""What `codemode serve` tells a client while one of its calls runs: a message and a
progress notification per sub-call, and a heartbeat. Apart from the server (`serve`), which
only opens one `McpCall` per request, reports to it and closes it before answering.

While a call runs, each of its sub-calls is reported as a `notifications/message` (logger
"codemode", level info, warning when it failed; data `{"callId", "tool", "ok",
"durationMs", "code"?, "message"?}`) and, when the request carried a progress token, as a
`notifications/progress` (progress counts notifications; the message names the sub-call);
a heartbeat progress notification follows every `progress_interval_s` of a long run. All
of them are sent before the result.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server.connection import allowed_log_levels

from codemode.pipeline import CallResult, Execution

__all__ = ["LOGGER_NAME", "McpCall"]

_log = logging.getLogger("codemode.serve")

LOGGER_NAME = "codemode"
"""The `logger` of the server's `notifications/message`."""

_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical",
                            "alert", "emergency")
_SEND_TIMEOUT_S = 10.0       # a client that stops reading cannot hold a call's result back


class McpCall:
    """One `tools/call` request being served: its context and the notifications it sends.

    Notifications are queued synchronously (pipeline observers are synchronous) and sent in
    order by one task, which `close()` drains before the result is returned.

    Args:
        ctx: the SDK's request context.
        progress_interval_s: seconds between heartbeats (None: none).
        log_level: the server's log level when a message is sent (`logging/setLevel`).
    """

    def __init__(self, ctx: Any, *, progress_interval_s: float | None,
                 log_level: Callable[[], str]) -> None:
        self.ctx = ctx
        self._log_level = log_level
        self._queue: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue()
        self._progress = 0
        self._subcalls = 0
        self._started_s = time.monotonic()
        meta = ctx.meta or {}
        self.wants_progress = meta.get("progress_token", meta.get("progressToken")) is not None
        self._sender = asyncio.ensure_future(self._send_all())
        self._ticker: asyncio.Future[None] | None = None
        if self.wants_progress and progress_interval_s is not None:
            self._ticker = asyncio.ensure_future(self._tick(progress_interval_s))

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
        if level not in allowed or _LEVELS.index(level) < _LEVELS.index(self._log_level()):
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
