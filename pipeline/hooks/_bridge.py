"""Hook bridges: ``command_hook`` (an external executable) and ``python_hook`` (a Python
callable) as ``tools/pre-execute`` or ``tools/post-execute`` listeners (docs/pipeline-spec.md §2
S4/S11, §10). Both share one ``_Hook``: matching, the ``Answer`` -> decision mapping and the
``hook/invoked`` / ``hook/result`` events."""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import re
import shlex
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from .._decisions import Accept, Allow, Ask, Block, Deny
from .._execution import Execution
from .._normalize import describe_thrown
from .._result import CallResult
from ..events import HookInvoked, HookResult
from ._answer import Answer, decide, interpret, summarize
from ._errors import HookError, HookTimeoutError
from ._payload import EVENT_NAMES, payload
from ._process import Aborted, Completed, TimedOut, run_command

if TYPE_CHECKING:
    from .._session import Session

__all__ = ["DIALECT", "PYTHON_DIALECT", "PythonHandler", "command_hook", "python_hook"]

_log = logging.getLogger("codemode.pipeline.hooks")

#: ``dialect`` of command hooks' ``hook/invoked`` events: JSON on stdin, exit code + JSON out
DIALECT = "command"
#: ``dialect`` of Python hooks' ``hook/invoked`` events: the handler's return value
PYTHON_DIALECT = "python"

Point = Literal["tools/pre-execute", "tools/post-execute"]

#: ``handler(execution)`` (pre) / ``handler(execution, result)`` (post) ->
#: ``dict | Answer | None``, or an awaitable of one
PythonHandler = Callable[..., Any]


class _Hook:
    """One registered hook; ``pre``/``post`` are its waterfall listeners. Subclasses get
    the hook's answer in ``_answer``; matching, the ``Answer`` -> decision mapping and the
    ``hook/invoked`` / ``hook/result`` events are shared here."""

    dialect: str

    def __init__(
        self, session: Session, point: Point, matcher: str | None, handler_id: str
    ) -> None:
        self.session = session
        self.point = point
        self.matcher = matcher
        self.pattern = None if matcher is None or matcher in ("", "*") else re.compile(matcher)
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

    async def post(
        self, execution: Execution, result: CallResult, next: Callable[[], Awaitable[Any]]
    ) -> Any:
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
        """Run the hook once; log ``hook/invoked`` and ``hook/result``. ``None``: the call
        is aborted (before the start: nothing runs or is logged); the caller delegates."""
        if execution.signal.aborted:
            return None
        turn = self.session.current_turn
        self.session.log.append(
            HookInvoked(
                turn=turn,
                point=self.point,
                dialect=self.dialect,
                handler_id=self.handler_id,
                matcher=self.matcher if self.matcher is not None else msgspec.UNSET,
            )
        )
        return await self._answer(execution, result, turn)

    async def _answer(
        self, execution: Execution, result: CallResult | None, turn: int
    ) -> Answer | None:
        """The hook's answer, its ``hook/result`` logged (``_answered``/``_logged``)."""
        raise NotImplementedError

    @property
    def _side(self) -> Literal["pre", "post"]:
        return "pre" if self.point == "tools/pre-execute" else "post"

    def _answered(
        self,
        turn: int,
        answer: Answer,
        duration_ms: float,
        *,
        exit_code: int | None = None,
        stderr: str | None = None,
    ) -> Answer:
        """Warn about an ``error`` answer, log its ``hook/result``; return it."""
        if answer.warning is not None:
            _log.warning("%s", answer.warning)
        self._logged(turn, answer.decision, duration_ms, exit_code=exit_code, stderr=stderr)
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


class _CommandHook(_Hook):
    """An executable: the call as JSON on stdin, its exit code and stdout as the answer."""

    dialect = DIALECT

    def __init__(
        self,
        session: Session,
        point: Point,
        argv: tuple[str, ...],
        matcher: str | None,
        timeout_s: float,
        handler_id: str,
    ) -> None:
        super().__init__(session, point, matcher, handler_id)
        self.argv = argv
        self.timeout_s = timeout_s

    async def _answer(
        self, execution: Execution, result: CallResult | None, turn: int
    ) -> Answer | None:
        """Run the command (killed if the call aborts meanwhile: ``None``)."""
        started = time.monotonic()
        try:
            outcome = await run_command(
                self.argv,
                payload(self.point, execution, result),
                timeout_s=self.timeout_s,
                signal=execution.signal,
            )
        except (OSError, ValueError, TypeError) as exc:  # missing, not executable, NUL in argv
            self._logged(turn, "error", (time.monotonic() - started) * 1000.0, stderr=str(exc))
            raise HookError(f'hook "{self.handler_id}" could not be started: {exc}') from None
        if isinstance(outcome, TimedOut):
            self._logged(turn, "timeout", outcome.duration_ms)
            raise HookTimeoutError(f'hook "{self.handler_id}" timed out after {self.timeout_s:g}s')
        if isinstance(outcome, Aborted):
            self._logged(turn, "aborted", outcome.duration_ms)
            return None
        assert isinstance(outcome, Completed)
        answer = interpret(self._side, outcome, self.handler_id)
        return self._answered(turn, answer, outcome.duration_ms, exit_code=outcome.exit_code,
                              stderr=summarize(outcome.stderr))


_VALID = {
    "pre": ("allow", "deny", "ask", "delegate", "error"),
    "post": ("block", "accept", "delegate", "error"),
}


class _PythonHook(_Hook):
    """A Python callable: its return value is the answer."""

    dialect = PYTHON_DIALECT

    def __init__(self, session: Session, point: Point, handler: PythonHandler, matcher: str | None,
                 handler_id: str) -> None:
        super().__init__(session, point, matcher, handler_id)
        self.handler = handler

    async def _answer(
        self, execution: Execution, result: CallResult | None, turn: int
    ) -> Answer | None:
        """Call the handler; a raising one logs ``error`` (``aborted`` when cancelled) and
        fails the call ``HOOK_FAILED`` (``hook "<id>" failed: <Class>: <message>``)."""
        started = time.monotonic()
        try:
            raw = self.handler(execution) if result is None else self.handler(execution, result)
            if inspect.isawaitable(raw):
                raw = await raw
        except asyncio.CancelledError:
            self._logged(turn, "aborted", (time.monotonic() - started) * 1000.0)
            raise
        except BaseException as exc:  # SystemExit too: a failed hook, never a host exit
            self._logged(turn, "error", (time.monotonic() - started) * 1000.0)
            raise HookError(f'hook "{self.handler_id}" failed: {describe_thrown(exc)}') from exc
        return self._answered(turn, self._convert(raw), (time.monotonic() - started) * 1000.0)

    def _convert(self, raw: Any) -> Answer:
        if raw is None:
            return Answer(decision="delegate")
        if isinstance(raw, Answer):
            if raw.decision in _VALID[self._side]:
                return raw
            return Answer(
                decision="error",
                warning=f'hook "{self.handler_id}" returned an unknown decision '
                f'{raw.decision!r} for {self.point}',
            )
        if isinstance(raw, Mapping):
            return decide(self._side, raw, self.handler_id)
        return Answer(
            decision="error",
            warning=f'hook "{self.handler_id}" returned {type(raw).__name__}, '
            "not a dict, an Answer or None",
        )


def _check_registration(kind: str, point: str, matcher: str | None) -> None:
    if point not in EVENT_NAMES:
        raise ValueError(f"{kind} hooks attach to {tuple(EVENT_NAMES)}, not {point!r}")
    if matcher is not None and matcher not in ("", "*"):
        try:
            re.compile(matcher)
        except re.error as exc:
            raise ValueError(
                f"hook matcher {matcher!r} is not a valid regular expression: {exc}"
            ) from None


def _register(hook: _Hook, agent: str | None) -> Callable[[], None]:
    listener = hook.pre if hook.point == "tools/pre-execute" else hook.post
    dispose: Callable[[], None] = hook.session.on(hook.point, listener, agent=agent)
    return dispose


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
    ``codemode.pipeline.hooks._payload``) and its answer decides (table: ``_answer``): exit 2 denies
    (pre) or blocks (post) with stderr as the reason; other non-zero exits are non-blocking
    errors (a warning, then ``next()``); exit 0 with no JSON delegates; JSON decisions map
    to ``Allow``/``Deny``/``Ask`` (pre) or ``Block``/accept with contexts (post). Tools the
    matcher skips run no process and log nothing.

    Each run logs ``hook/invoked {turn, point, dialect: "command", handlerId, matcher?}``
    and ``hook/result {turn, point, handlerId, decision, exitCode?, stderrSummary?,
    durationMs}``; ``decision`` is one of the answers above, ``"timeout"`` or ``"aborted"``.

    Failures of the hook itself fail the call on the final-result route (docs/pipeline-spec.md §2:
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
    _check_registration("command", point, matcher)
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
    if (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, (int, float))
        or not math.isfinite(timeout_s)
        or timeout_s <= 0
    ):
        raise ValueError(f"timeout_s must be a positive number of seconds, not {timeout_s!r}")
    return _register(
        _CommandHook(session, point, argv, matcher, float(timeout_s), handler_id or default_id),
        agent,
    )


def python_hook(
    session: Session,
    point: Point,
    handler: PythonHandler,
    *,
    matcher: str | None = None,
    handler_id: str | None = None,
    agent: str | None = None,
) -> Callable[[], None]:
    """Register a Python callable as a pre- or post-execute hook; return its disposer.

    For each call whose tool name the ``matcher`` regex matches in full (``None``, ``""``
    or ``"*"``: every tool), ``handler(execution)`` (pre) or ``handler(execution, result)``
    (post) runs once; it may be async. It answers like a command hook's JSON (the same
    mapping, ``_answer.decide``): ``None`` abstains (delegate); a dict such as
    ``{"decision": "deny", "reason": "..."}`` maps exactly like a command's stdout object
    (``allow``/``deny``/``ask`` pre, ``block``/``additionalContext`` post); an ``Answer``
    is taken as is. An unknown decision or any other return is a non-blocking error (a
    warning, then ``next()``).

    Each run logs ``hook/invoked {..., dialect: "python"}`` and ``hook/result`` (no exit
    code or stderr). A handler that raises (``SystemExit`` included) logs ``decision:
    "error"`` and fails the call ``HOOK_FAILED`` (``hook "<id>" failed: <Class>: <message>``)
    on the final-result route; for a call already aborted the handler does not run and
    nothing is logged.

    Args:
        session: the ``Session`` (its log receives the events).
        point: ``"tools/pre-execute"`` or ``"tools/post-execute"``.
        handler: ``(execution) -> answer`` or ``(execution, result) -> answer``.
        matcher: regex on the tool name, matched in full.
        handler_id: id in the events (default: the handler's qualified name).
        agent: register for this agent's calls only (see ``Session.on``).

    Raises:
        ValueError: unknown point or a matcher that is not a valid regular expression.
        TypeError: ``handler`` is not callable.
    """
    _check_registration("python", point, matcher)
    if not callable(handler):
        raise TypeError(f"the hook handler must be callable, not {handler!r}")
    default_id = getattr(handler, "__qualname__", None) or repr(handler)
    return _register(_PythonHook(session, point, handler, matcher, handler_id or default_id), agent)
