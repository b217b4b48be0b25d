"""The approval channel of one run's sub-calls (docs/codemode.md "Pausing for approval").

A sub-call's approval does not go to the session's channel directly: a decision a
resumption carries answers it, and with nobody to ask the approval is deferred, so that the
run can pause (`dispatch`) and be resumed with the decisions (`resumed`). Separate from the
dispatcher, which hands this channel to every sub-call it starts.
"""

from __future__ import annotations

import msgspec

from codemode.pipeline import (
    ApprovalAnswer,
    ApprovalDecision,
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalService,
    Session,
    events,
)

from .approval_uses import APPROVED
from .plan_approval import Grants
from .subcalls import _Slot


class _RunApprovals:
    """The approval channel of one run's sub-calls: a decision the resumption carries
    answers (and is audited like an answer); with no approver on the session
    (`Session.has_approver`), or when the policy allows deferring (`Ask(defer=True)`), the
    approval is deferred; otherwise the session's channel is asked, as for a direct call."""

    def __init__(self, session: Session, run_id: str, slots: dict[str, _Slot],
                 decisions: dict[str, ApprovalDecision], grants: Grants | None = None) -> None:
        self._session = session
        self._run_id = run_id
        self._slots = slots
        self._decisions = decisions
        # the plan approval the run follows, if any: a resumed run's comes from its record
        self.grants = grants if grants is not None else Grants(APPROVED.get())

    def decision_for(self, request_id: str) -> ApprovalDecision | None:
        """The decision given for `request_id`, if any (not used up by looking)."""
        return self._decisions.get(request_id)

    def _audit(self, request: ApprovalRequest, granted: ApprovalAnswer) -> None:
        """Log a plan approval's answer as an approval service would (`approval/asked`,
        then `approval/decided` with `by`) when none is mounted, so that the log still
        says which approval decided the call; the id is the sub-call's own."""
        approval_id = f"{request.call_id}:approval"
        self._session.log.append(events.ApprovalAsked(
            id=approval_id, tool_name=request.tool_name, call_id=request.call_id,
            reason=request.reason if request.reason is not None else msgspec.UNSET))
        self._session.log.append(events.ApprovalDecided(
            id=approval_id, outcome=granted.outcome,
            by=granted.by if granted.by is not None else msgspec.UNSET))

    async def request(self, request: ApprovalRequest) -> str | ApprovalAnswer:
        slot = self._slots.get(request.call_id)
        key = f"{self._run_id}:{slot.sub.n}" if slot is not None else ""
        if slot is not None:
            slot.reason = request.reason
        decision = self._decisions.pop(key, None)
        channel = self._session.approval
        granted = self.grants.answer(request.tool_name, slot.sub.arguments) \
            if slot is not None and decision is None else None
        if granted is not None:
            if not isinstance(channel, ApprovalService):
                self._audit(request, granted)
            elif self._session.turn_open and channel.record(
                    request, granted.outcome, by=granted.by) != granted.outcome:
                return ApprovalAnswer("rejected", granted.reason)
            return granted
        if decision is not None:
            outcome: ApprovalOutcome = "allowed-once" if decision.approved else "rejected"
            if isinstance(channel, ApprovalService) and self._session.turn_open \
                    and channel.record(request, outcome) != outcome:
                outcome = "rejected"             # the session's policy is "never"
            reason = decision.reason if isinstance(decision.reason, str) else None
            return ApprovalAnswer(outcome, reason)
        if channel is None or request.defer or not self._session.has_approver(request.agent
                                                                              or None):
            return "deferred"
        return await channel.request(request)
