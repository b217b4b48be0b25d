"""The one-shot approval channel (docs/pipeline-spec.md §4).

Outcomes: ``"allowed-once"`` | ``"rejected"`` | ``"cancelled"`` | ``"unavailable"`` |
``"deferred"``. There is no "always": an approval authorizes only the call that asked.
``"deferred"`` means nobody answers now: the call fails ``APPROVAL_PENDING`` without running,
for a caller that stops and asks later (a Code-Mode run pauses, ``Session.resume`` goes on).
A channel may answer an ``ApprovalAnswer`` instead of a bare outcome to give a rejection
its reason.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from ._errors import ApprovalError
from ._signal import Signal
from ._waterfall import Waterfall
from .events import ApprovalAsked, ApprovalDecided, Event

__all__ = [
    "APPROVAL_OUTCOMES",
    "ApprovalAnswer",
    "ApprovalChannel",
    "ApprovalOutcome",
    "ApprovalRequest",
    "ApprovalService",
]

_log = logging.getLogger("codemode.pipeline")

ApprovalOutcome = Literal["allowed-once", "rejected", "cancelled", "unavailable", "deferred"]
APPROVAL_OUTCOMES: tuple[str, ...] = ("allowed-once", "rejected", "cancelled", "unavailable",
                                      "deferred")


class ApprovalAnswer(msgspec.Struct, frozen=True):
    """An outcome with the answerer's reason (shown to the caller in a rejection) and, when
    the answer comes from a standing decision rather than someone asked now, what gave it
    (`by`, an opaque text the pipeline only logs: ``approval/decided``'s ``by``)."""

    outcome: ApprovalOutcome
    reason: str | None = None
    by: str | None = None


class ApprovalRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What an answerer sees. Deliberately carries **no arguments**: the answerer relies on
    the already-displayed call (for sub-calls ``call_id`` is the sub-call id)."""

    agent: str
    tool_name: str
    call_id: str
    reason: str | None
    signal: Signal
    defer: bool = False      # the asker may stop and come back (``Ask(defer=True)``)


@runtime_checkable
class ApprovalChannel(Protocol):
    """Anything with ``async request(ApprovalRequest) -> outcome`` can stand in."""

    async def request(self, request: ApprovalRequest) -> str | ApprovalAnswer: ...


class ApprovalService:
    """The default channel: audit events, session policy, an answerer waterfall.

    - ``request`` needs an open turn (``turn_open()``); otherwise, or if an audit append
      fails, it raises (the tool call then fails on the final route).
    - It logs ``approval/asked`` before deciding and ``approval/decided`` after.
    - Policy ``"never"`` -> ``"rejected"`` without consulting anyone. Policy ``"ask"`` -> the
      answerers (``(request, next) -> outcome``; default ``"unavailable"``); a raising
      answerer or an outcome outside the vocabulary (a string of it or an ``ApprovalAnswer``)
      -> ``"unavailable"``; an aborted signal ->
      ``"cancelled"`` at once (the pending answer is cancelled and ignored).
    """

    def __init__(
        self,
        *,
        append: Callable[[Event], Event],
        turn_open: Callable[[], bool],
        answerers: Waterfall[str],
        policy: Literal["ask", "never"] = "ask",
    ) -> None:
        if policy not in ("ask", "never"):
            raise ValueError(f"approval policy must be 'ask' or 'never', not {policy!r}")
        self._append = append
        self._turn_open = turn_open
        self._answerers = answerers
        self.policy = policy
        self._ids = itertools.count(1)

    async def request(self, request: ApprovalRequest) -> str | ApprovalAnswer:
        approval_id = self._asked(request)
        outcome = await self._decide(request)
        by = outcome.by if isinstance(outcome, ApprovalAnswer) else None
        self._append(ApprovalDecided(
            id=approval_id,
            outcome=outcome.outcome if isinstance(outcome, ApprovalAnswer) else outcome,
            by=by if by is not None else msgspec.UNSET))
        return outcome

    def record(self, request: ApprovalRequest, outcome: ApprovalOutcome, *,
               by: str | None = None) -> str:
        """Log an outcome decided elsewhere (a decision given to ``Session.resume``, a
        standing approval) with the same audit events as ``request``: ``approval/asked``
        then ``approval/decided`` (whose ``by`` is `by`, what gave the decision, when given).
        Session policy ``"never"`` still wins: the outcome is then ``"rejected"`` (and
        ``by`` is not logged: the policy decided).

        Returns:
            The outcome as logged.
        Raises:
            ApprovalError: no turn is open.
        """
        approval_id = self._asked(request)
        if self.policy == "never":
            outcome, by = "rejected", None
        self._append(ApprovalDecided(id=approval_id, outcome=outcome,
                                     by=by if by is not None else msgspec.UNSET))
        return outcome

    def _asked(self, request: ApprovalRequest) -> str:
        """Log ``approval/asked`` for ``request``; its approval id.

        Raises:
            ApprovalError: no turn is open.
        """
        if not self._turn_open():
            raise ApprovalError(
                f'approval for tool "{request.tool_name}" was requested outside an open turn'
            )
        approval_id = f"approval_{next(self._ids)}"
        self._append(
            ApprovalAsked(
                id=approval_id,
                tool_name=request.tool_name,
                call_id=request.call_id,
                reason=request.reason if request.reason is not None else msgspec.UNSET,
            )
        )
        return approval_id

    async def _decide(self, request: ApprovalRequest) -> str | ApprovalAnswer:
        if self.policy == "never":
            return "rejected"
        if request.signal.aborted:
            return "cancelled"

        async def ask() -> Any:
            try:
                return await self._answerers.run((request,), lambda: "unavailable",
                                                 (request.agent,))
            except asyncio.CancelledError:
                raise
            except BaseException:  # SystemExit too: this runs as a task, never let it out
                _log.warning("approval answerer raised", exc_info=True)
                return "unavailable"

        answer = asyncio.ensure_future(ask())
        aborted = asyncio.ensure_future(request.signal.wait())
        try:
            await asyncio.wait({answer, aborted}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            aborted.cancel()
        if not answer.done():
            answer.cancel()
            await asyncio.gather(answer, return_exceptions=True)
            return "cancelled"
        if request.signal.aborted:
            return "cancelled"
        if answer.cancelled():
            return "unavailable"
        if answer.exception() is not None:
            _log.warning("approval answerer raised", exc_info=answer.exception())
            return "unavailable"
        outcome = answer.result()
        if isinstance(outcome, ApprovalAnswer):
            return outcome
        return (
            outcome if isinstance(outcome, str) and outcome in APPROVAL_OUTCOMES else "unavailable"
        )


Answerer = Callable[[ApprovalRequest, Callable[[], Awaitable[str]]], Any]
