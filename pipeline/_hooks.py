"""Hook bridges: external hooks mapped onto ``tools/pre-execute`` (PIPELINE.md S4, §10).

A hook handler looks at the read-only execution and answers ``deny`` / ``ask`` (with a
reason) or abstains; the bridge maps deny -> ``Deny(reason)``, ask -> ``Ask(reason)`` and
anything else -> delegate (``next()``). Each invocation whose matcher fits is logged as
``hook/invoked`` before and ``hook/result`` after (both log-only). A handler that raises
fails the call on the final route, like any pre-execute listener.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
from typing import Any, Awaitable, Callable, Literal

import msgspec

from ._decisions import Ask, Deny
from ._execution import Execution
from ._lossless import thaw
from .events import Event, HookInvoked, HookResult

__all__ = ["HookOutput", "command_hook", "hook_listener"]


class HookOutput(msgspec.Struct, frozen=True, kw_only=True):
    """What a handler returns. ``decision=None`` (or ``"allow"``) abstains."""

    decision: Literal["deny", "ask", "allow"] | None = None
    reason: str | None = None
    exit_code: int | None = None
    stderr: str | None = None


HookHandler = Callable[[Execution], "HookOutput | dict[str, Any] | None | Awaitable[Any]"]


def hook_listener(
    handler: HookHandler,
    *,
    handler_id: str,
    append: Callable[[Event], Any],
    turn: Callable[[], int],
    matcher: str | None = None,
    dialect: str = "python",
) -> Callable[[Execution, Callable[[], Awaitable[Any]]], Awaitable[Any]]:
    """A ``tools/pre-execute`` listener running ``handler`` for tools whose name fully
    matches the regular expression ``matcher`` (all tools when ``None``)."""
    pattern = re.compile(matcher) if matcher is not None else None

    async def listener(execution: Execution, next: Callable[[], Awaitable[Any]]) -> Any:
        if pattern is not None and not pattern.fullmatch(execution.name):
            return await next()
        append(HookInvoked(turn=turn(), point="tools/pre-execute", dialect=dialect, handler_id=handler_id,
                           matcher=matcher if matcher is not None else msgspec.UNSET))
        started = time.monotonic()
        try:
            raw = handler(execution)
            if inspect.isawaitable(raw):
                raw = await raw
            output = raw if isinstance(raw, HookOutput) else msgspec.convert(raw or {}, HookOutput)
        except BaseException:
            append(HookResult(turn=turn(), point="tools/pre-execute", handler_id=handler_id, decision="error",
                              duration_ms=(time.monotonic() - started) * 1000))
            raise
        decision = output.decision if output.decision in ("deny", "ask") else "delegate"
        stderr = (output.stderr or "").strip()
        append(HookResult(
            turn=turn(), point="tools/pre-execute", handler_id=handler_id, decision=decision,
            duration_ms=(time.monotonic() - started) * 1000,
            exit_code=output.exit_code if output.exit_code is not None else msgspec.UNSET,
            stderr_summary=stderr[:500] if stderr else msgspec.UNSET,
        ))
        if decision == "deny":
            return Deny(output.reason or f'hook "{handler_id}" denied tool "{execution.name}"')
        if decision == "ask":
            return Ask(output.reason)
        return await next()

    return listener


def command_hook(argv: list[str], *, timeout_s: float = 30.0) -> HookHandler:
    """A handler that runs an external command per call.

    The command gets ``{"toolName", "callId", "agent", "arguments"}`` as JSON on stdin.
    Exit 0: stdout may hold ``{"decision": "deny"|"ask", "reason": ...}`` (empty: abstain).
    Exit 2: deny, the reason is stderr. Any other exit: abstain (the exit code and stderr are
    logged). The process is killed when the call's signal aborts or ``timeout_s`` passes
    (then it raises ``TimeoutError``).
    """

    async def run(execution: Execution) -> HookOutput:
        payload = msgspec.json.encode({
            "toolName": execution.name, "callId": execution.call_id, "agent": execution.agent,
            "arguments": thaw(execution.arguments),
        })
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        dispose = execution.signal.on_abort(lambda _r: proc.kill() if proc.returncode is None else None)
        try:
            out, err = await asyncio.wait_for(proc.communicate(payload), timeout_s)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise TimeoutError(f"hook {argv[0]!r} timed out after {timeout_s}s") from None
        finally:
            dispose()
        stderr = err.decode(errors="replace")
        code = proc.returncode
        if code == 2:
            return HookOutput(decision="deny", reason=stderr.strip() or None, exit_code=2, stderr=stderr)
        if code != 0:
            return HookOutput(exit_code=code, stderr=stderr)
        text = out.decode(errors="replace").strip()
        if not text:
            return HookOutput(exit_code=0, stderr=stderr)
        parsed = msgspec.json.decode(text)
        if not isinstance(parsed, dict):
            return HookOutput(exit_code=0, stderr=stderr)
        return HookOutput(decision=parsed.get("decision"), reason=parsed.get("reason"), exit_code=0, stderr=stderr)

    return run
