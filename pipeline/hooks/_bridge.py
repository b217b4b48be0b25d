"""``command_hook``: an external executable as a ``tools/pre-execute`` or
``tools/post-execute`` listener (PIPELINE.md §2 S4/S11, §10)."""

from __future__ import annotations

import logging
import math
import re
import shlex
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Literal, Sequence

import msgspec

from .._decisions import Accept, Allow, Ask, Block, Deny
from .._execution import Execution
from .._result import CallResult
from ..events import HookInvoked, HookResult
from ._answer import Answer, interpret, summarize
from ._errors import HookError, HookTimeoutError
from ._payload import EVENT_NAMES, payload
from ._process import Aborted, Completed, TimedOut, run_command

if TYPE_CHECKING:
    from .._session import Session

__all__ = ["DIALECT", "command_hook"]

_log = logging.getLogger("pipeline.hooks")

#: ``dialect`` of this bridge's ``hook/invoked`` events: JSON on stdin, exit code + JSON out
DIALECT = "command"

Point = Literal["tools/pre-execute", "tools/post-execute"]


class _CommandHook:
    """One registered hook command; ``pre``/``post`` are its waterfall listeners."""

    def __init__(
        self,
        session: Session,
        point: Point,
        argv: tuple[str, ...],
        matcher: str | None,
        timeout_s: float,
        handler_id: str,
    ) -> None:
        self.session = session
        self.point = point
        self.argv = argv
        self.matcher = matcher
        self.pattern = None if matcher is None or matcher in ("", "*") else re.compile(matcher)
        self.timeout_s = timeout_s
        self.handler_id = handler_id

    def matches(self, tool_name: str) -> bool:
        return self.pattern is None or self.pattern.fullmatch(tool_name) is not None

    async def pre(self, execution: Execution, next: Callable[[], Awaitable[Any]]) -> Any:
        if not self.matches(execution.name):
            return await next()
        answer = await self._invoke(execution, None)
        if answer is None or answer.decision in ("delegate", "error"):
            return await next()
        if answer.decision == "allow":
            return Allow()
        if answer.decision == "ask":
            return Ask(answer.reason)
        return Deny(answer.reason or f'denied by hook "{self.handler_id}"')

    async def post(self, execution: Execution, result: CallResult, next: Callable[[], Awaitable[Any]]) -> Any:
        if not self.matches(execution.name):
            return await next()
        answer = await self._invoke(execution, result)
        if answer is not None and answer.decision == "block":
            return Block(answer.reason or f'blocked by hook "{self.handler_id}"')
        decision = await next()
        if answer is not None and answer.contexts and isinstance(decision, Accept):
            decision = msgspec.structs.replace(
                decision, additional_contexts=(*decision.additional_contexts, *answer.contexts)
            )
        return decision

    async def _invoke(self, execution: Execution, result: CallResult | None) -> Answer | None:
        """Run the command once; log ``hook/invoked`` and ``hook/result``. ``None``: the
        call is aborted (before the start: nothing runs or is logged; meanwhile: the
        process is killed); the caller delegates."""
        if execution.signal.aborted:
            return None
        turn = self.session.current_turn
        self.session.log.append(
            HookInvoked(
                turn=turn,
                point=self.point,
                dialect=DIALECT,
                handler_id=self.handler_id,
                matcher=self.matcher if self.matcher is not None else msgspec.UNSET,
            )
        )
        started = time.monotonic()
        try:
            outcome = await run_command(
                self.argv, payload(self.point, execution, result), timeout_s=self.timeout_s, signal=execution.signal
            )
        except OSError as exc:
            self._logged(turn, "error", (time.monotonic() - started) * 1000.0, stderr=str(exc))
            raise HookError(f'hook "{self.handler_id}" could not be started: {exc}') from None
        if isinstance(outcome, TimedOut):
            self._logged(turn, "timeout", outcome.duration_ms)
            raise HookTimeoutError(f'hook "{self.handler_id}" timed out after {self.timeout_s:g}s')
        if isinstance(outcome, Aborted):
            self._logged(turn, "aborted", outcome.duration_ms)
            return None
        assert isinstance(outcome, Completed)
        answer = interpret("pre" if self.point == "tools/pre-execute" else "post", outcome, self.handler_id)
        if answer.warning is not None:
            _log.warning("%s", answer.warning)
        self._logged(turn, answer.decision, outcome.duration_ms, exit_code=outcome.exit_code,
                     stderr=summarize(outcome.stderr))
        return answer

    def _logged(self, turn: int, decision: str, duration_ms: float, *, exit_code: int | None = None,
                stderr: str | None = None) -> None:
        self.session.log.append(
            HookResult(
                turn=turn,
                point=self.point,
                handler_id=self.handler_id,
                decision=decision,
                duration_ms=duration_ms,
                exit_code=exit_code if exit_code is not None else msgspec.UNSET,
                stderr_summary=stderr if stderr else msgspec.UNSET,
            )
        )


def command_hook(
    session: Session,
    point: Point,
    command: str | Sequence[str],
    *,
    matcher: str | None = None,
    timeout_s: float = 10.0,
    handler_id: str | None = None,
    agent: str | None = None,
) -> Callable[[], None]:
    """Register an executable as a pre- or post-execute listener; return its disposer.

    For each call whose tool name the ``matcher`` regex matches in full (``None``, ``""``
    or ``"*"``: every tool), the command runs once with the call as JSON on stdin (shape:
    ``pipeline.hooks._payload``) and its answer decides (table: ``_answer``): exit 2 denies
    (pre) or blocks (post) with stderr as the reason; other non-zero exits are non-blocking
    errors (a warning, then ``next()``); exit 0 with no JSON delegates; JSON decisions map
    to ``Allow``/``Deny``/``Ask`` (pre) or ``Block``/accept with contexts (post). Tools the
    matcher skips run no process and log nothing.

    Each run logs ``hook/invoked {turn, point, dialect: "command", handlerId, matcher?}``
    and ``hook/result {turn, point, handlerId, decision, exitCode?, stderrSummary?,
    durationMs}``; ``decision`` is one of the answers above, ``"timeout"`` or ``"aborted"``.

    Failures of the hook itself fail the call on the final-result route (PIPELINE.md §2:
    a throw from a hook bridge), so a broken policy never lets a call through:
    a command still running after ``timeout_s`` seconds is killed with its process group
    and the call fails ``HOOK_TIMEOUT`` (``hook "<id>" timed out after <s>s``); a command
    that cannot be started fails ``HOOK_FAILED``. If the call's signal aborts while the
    command runs, it is killed and the listener delegates (the pipeline then reports the
    cancellation); for a call already aborted (a post-execute hook after an abort during
    the body) no command runs and nothing is logged.

    Args:
        session: the ``Session`` (its log receives the events).
        point: ``"tools/pre-execute"`` or ``"tools/post-execute"``.
        command: a shell command line (run with ``/bin/sh -c``) or an argv list (run as is).
        matcher: regex on the tool name, matched in full (``"edit|write"``).
        timeout_s: seconds the command may run (> 0).
        handler_id: id in the events (default: the command text).
        agent: register for this agent's calls only (see ``Session.on``).

    Raises:
        ValueError: unknown point, empty command, bad timeout, or a matcher that is not a
            valid regular expression.
    """
    if point not in EVENT_NAMES:
        raise ValueError(f"command hooks attach to {tuple(EVENT_NAMES)}, not {point!r}")
    if isinstance(command, str):
        if not command.strip():
            raise ValueError("the hook command is empty")
        argv: tuple[str, ...] = ("/bin/sh", "-c", command)
        default_id = command
    else:
        argv = tuple(command)
        if not argv or not all(isinstance(part, str) for part in argv) or not argv[0]:
            raise ValueError("the hook argv must be a non-empty list of strings")
        default_id = shlex.join(argv)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not math.isfinite(timeout_s) \
            or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, not {timeout_s!r}")
    if matcher is not None and matcher not in ("", "*"):
        try:
            re.compile(matcher)
        except re.error as exc:
            raise ValueError(f"hook matcher {matcher!r} is not a valid regular expression: {exc}") from None
    hook = _CommandHook(session, point, argv, matcher, float(timeout_s), handler_id or default_id)
    listener = hook.pre if point == "tools/pre-execute" else hook.post
    dispose: Callable[[], None] = session.on(point, listener, agent=agent)
    return dispose
