"""One approval for a whole plan (docs/codemode.md "Plan before the run").

`approve_plan` decides every entry of a `Plan` the policy would ask about at once (approved,
or denied with a reason) and seals the decisions, bound to the program and to each entry's
exact tool and arguments, with the `CodeMode`'s seal key (as a paused run's record is).
`run_approved` checks the seal (`ResumeTampered` before anything runs) and that no run of
the session's log used the approval yet (`approval_uses`: `ApprovalUsed`; an approval is
used once per log), and runs the program for real: a call that asks and matches an unused
approved entry (same tool, equal arguments) runs without another ask; one that matches a
denied entry is a binding rejection with the entry's reason; a call that matches no entry
goes through the policy as usual and can still pause the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from codemode.pipeline import ApprovalAnswer, CallResult, thaw

from .approval_record import ApprovedEntry, PlanApproval
from .approval_uses import APPROVED, ApprovalUsed, refuse_if_used
from .plan import Plan, PlanOverQuota
from .seal import ResumeTampered

__all__ = ["ApprovalUsed", "ApprovedEntry", "PlanApproval", "approve_plan", "run_approved"]


def _sign(mode: Any, approval: PlanApproval) -> str:
    return str(mode.seal_key.sign(run_id=approval.id, name="plan", arguments={
        "code": approval.code}, requests=approval.entries, state={}, agent=None))


def approve_plan(mode: Any, plan: Plan, *, deny: Mapping[int, str] = {}) -> PlanApproval:
    """Decide every entry of `plan` the policy would ask about: approved, except those whose
    number (`PlanEntry.n`) `deny` maps to a reason. Sealed with `mode.seal_key`.

    Raises:
        PlanOverQuota: the plan exceeds a quota (`Plan.over_quota`): the real run would
            refuse those calls, so the plan is not approved at all.
        ValueError: `deny` names an entry that is not an asked one.
    """
    import secrets  # here, not at the top: it loads OpenSSL, which only approvals need

    if plan.over_quota:
        raise PlanOverQuota(plan.over_quota)
    asked = {e.n: e for e in plan.asked()}
    unknown = sorted(set(deny) - set(asked))
    if unknown:
        raise ValueError(f"entries {unknown} are not entries the policy asks about "
                         f"(those are {sorted(asked)})")
    entries = tuple(ApprovedEntry(n=e.n, tool=e.tool, arguments=e.arguments,
                                  approved=e.n not in deny, reason=deny.get(e.n, ""))
                    for e in asked.values())
    approval = PlanApproval(id=secrets.token_hex(8), code=plan.code, entries=entries)
    return msgspec.structs.replace(approval, seal=_sign(mode, approval))


async def run_approved(mode: Any, approval: PlanApproval, *, agent: str | None = None,
                       description: str | None = None,
                       call_id: str | None = None) -> CallResult:
    """Run `approval.code` for real through `mode`'s `run_code`, following `approval`
    (as `agent`; `description` is the call's title, as `run_code` takes it; `call_id` the
    call's id, None: the session makes one). The run logs that it used the approval
    (`tool/code-approval-used`) before its program starts: an approval is used once per
    log, whatever the run's outcome. A session whose log is in memory remembers that only
    while it lives.

    Returns:
        The `run_code` call's result (it may still be a paused run, for calls that matched
        no entry). A run of the same session that used the approval meanwhile makes it a
        failed result with the code `APPROVAL_USED`.
    Raises:
        ResumeTampered: the approval's seal does not match it (changed, or sealed with
            another key); nothing ran.
        ApprovalUsed: (a `ResumeTampered`) a run of the session's log already used the
            approval; nothing ran.
    """
    import hmac

    want = _sign(mode, msgspec.structs.replace(approval, seal=""))
    if not hmac.compare_digest(approval.seal, want):
        raise ResumeTampered(f"the plan approval {approval.id!r} was changed after it was "
                             "given (its seal does not match, or another key sealed it); "
                             "nothing ran")
    refuse_if_used(mode.session.log.read(), approval)
    token = APPROVED.set(approval)
    try:
        arguments = {"code": approval.code}
        if description is not None:
            arguments["description"] = description
        result: CallResult = await mode.session.call(mode.definition.name, arguments,
                                                     agent=agent, call_id=call_id)
        return result
    finally:
        APPROVED.reset(token)


class Grants:
    """The entries of the approval a run follows, each used once, in order; `used` names
    those used already (a resumed run's, from its sealed record: `RunRecord.plan_used`)."""

    def __init__(self, approval: PlanApproval | None, used: tuple[int, ...] = ()) -> None:
        self.approval = approval
        self.used = used

    def answer(self, tool: str, arguments: Any) -> ApprovalAnswer | None:
        """The answer an asked call gets from the approval, or None (no entry matches); its
        `by` names the approval and entry ("plan approval <id>, entry <n>"), which the log's
        ``approval/decided`` carries."""
        if self.approval is None:
            return None
        for entry in self.approval.entries:
            if entry.n in self.used or entry.tool != tool \
                    or not _same(entry.arguments, arguments):
                continue
            self.used = (*self.used, entry.n)
            where = f"plan approval {self.approval.id}, entry {entry.n}"
            if entry.approved:
                return ApprovalAnswer("allowed-once", f"approved by {where}", by=where)
            return ApprovalAnswer("rejected", f"{entry.reason} ({where})"
                                  if entry.reason else f"denied by {where}", by=where)
        return None


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(msgspec.json.encode(a, order="sorted")
                    == msgspec.json.encode(thaw(b), order="sorted"))
    except (TypeError, ValueError):
        return False
