"""Which runs used a plan approval, from sealed data (docs/codemode.md "Plan before the
run").

A plan approval (`plan_approval.PlanApproval`) is used by one run per log. When a run that
follows one starts, before its program does anything, `run_code` logs
`tool/code-approval-used`: the run's call and the approval's id and seal, sealed together
with the same key. From those markers:

- an approval the log shows used is refused (`ApprovalUsed`) before anything runs,
  whatever the earlier run's outcome: it failed, paused, or its process died (plan again).
  This fails closed: a marker whose seal does not match counts, and so does a decision the
  approval gave (a log edited to remove the marker still names it in `approval/decided`);
- `approval_problems` lists, for `codemode log check`, a marker whose seal does not match,
  an approval used by a second run, and calls decided by a plan approval (`approval/decided`
  whose `by` names it) in a run without a marker of it, or in more than one run.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from codemode.pipeline import events

from .seal import ResumeTampered, SealKey

if TYPE_CHECKING:
    from .approval_record import PlanApproval

__all__ = ["APPROVED", "ApprovalUsed", "approval_problems", "follow", "marker",
           "refuse_if_used", "use"]

APPROVED: contextvars.ContextVar[PlanApproval | None] = contextvars.ContextVar(
    "codemode_plan_approval", default=None)
"""The approval the current task's run follows (`plan_approval.run_approved` sets it)."""

BY = re.compile(r"plan approval ([0-9a-f]+), entry \d+")
"""The `by` of an answer a plan approval gave (`plan_approval.Grants.answer`)."""


class ApprovalUsed(ResumeTampered):
    """The plan approval was already used by a run of this log (a `tool/code-approval-used`
    marker says so): an approval is used once per log; nothing ran."""

    code = "APPROVAL_USED"


def _sign(key: SealKey, *, approval_id: str, approval_seal: str, call_id: str) -> str:
    # the run's call is part of the name: a marker cannot be moved to another run
    return key.sign(run_id=approval_id, name=f"plan approval used by {call_id}",
                    arguments={"approval_seal": approval_seal}, requests=(), state={},
                    agent=None)


def _holds(key: SealKey, marker: events.CodeApprovalUsed) -> bool:
    import hmac  # here, not at the top: it loads OpenSSL, which only approvals need

    want = _sign(key, approval_id=marker.approval_id, approval_seal=marker.approval_seal,
                 call_id=marker.parent_call_id)
    return hmac.compare_digest(marker.seal, want)


def refuse_if_used(log: Sequence[events.Event], approval: PlanApproval) -> None:
    """Refuse `approval` when `log` shows it used: a `tool/code-approval-used` marker that
    names it, whether or not its seal holds (a marker someone changed fails closed), or a
    decision it gave (`approval/decided` whose `by` names it: a marker someone removed).

    Raises:
        ApprovalUsed: the log shows a use (the message names the run's call, when known)."""
    for event in log:
        if isinstance(event, events.CodeApprovalUsed) and (
                event.approval_id == approval.id or event.approval_seal == approval.seal):
            by = f"by the run {event.parent_call_id!r} of this log"
        elif isinstance(event, events.ApprovalDecided) and isinstance(event.by, str) \
                and (found := BY.fullmatch(event.by)) is not None and found[1] == approval.id:
            by = f"in this log (it decided {event.id!r})"
        else:
            continue
        raise ApprovalUsed(
            f"the plan approval {approval.id!r} was already used {by}; an "
            "approval is used once per log, whatever that run's outcome (plan the program "
            "again for another run); nothing ran")


def marker(key: SealKey, approval: PlanApproval, *, root_call_id: str,
           call_id: str) -> events.CodeApprovalUsed:
    """The `tool/code-approval-used` marker of the run `call_id` that follows `approval`,
    sealed with `key`.

    Raises:
        SealKeyError: the key cannot be used."""
    return events.CodeApprovalUsed(
        root_call_id=root_call_id, parent_call_id=call_id, approval_id=approval.id,
        approval_seal=approval.seal,
        seal=_sign(key, approval_id=approval.id, approval_seal=approval.seal,
                   call_id=call_id))


def use(log: Any, approval: PlanApproval, key: SealKey, *, root_call_id: str,
        call_id: str) -> None:
    """Before the run `call_id` that follows `approval` starts: refuse the approval when
    `log` shows it used, else log the run's `tool/code-approval-used` marker. Nothing is
    awaited between the two, so two runs of one process cannot both use it (and a log has
    one writing process: `LogInUseError`).

    Raises:
        ApprovalUsed: as `refuse_if_used`.
        SealKeyError: the key cannot be used."""
    refuse_if_used(log.read(), approval)
    log.append(marker(key, approval, root_call_id=root_call_id, call_id=call_id))


def follow(session: Any, key: SealKey, execution: Any) -> None:
    """Before the run `execution` (its `call_id`, `root_call_id`) starts its program: when
    it follows a plan approval (`APPROVED`) in an open turn of `session`, `use` it.

    Raises:
        ApprovalUsed: a run of the session's log already used it.
        SealKeyError: the key cannot be used."""
    approval = APPROVED.get()
    if approval is not None and session.turn_open:
        use(session.log, approval, key, root_call_id=execution.root_call_id,
            call_id=execution.call_id)


def approval_problems(log: Sequence[events.Event],
                      key: SealKey | None) -> list[tuple[int, str]]:
    """What `codemode log check` reports of the plan approvals in `log`, as (seq, message),
    in log order: a `tool/code-approval-used` marker whose seal does not match under `key`
    (not checked when `key` is None); an approval a second run used; calls a plan approval
    decided (`approval/decided` whose `by` names it) in a run without its marker, or in a
    second run (a resumption's calls count as its run's: `tool/resumed`).

    Raises:
        SealKeyError: the key cannot be used."""
    problems: list[tuple[int, str]] = []
    used_by: dict[str, str] = {}                 # approval id -> the first run that used it
    marked: set[tuple[str, str]] = set()         # (approval id, run call id)
    run_of: dict[str, str] = {}                  # sub-call id -> its run's call id
    resumed: dict[str, str] = {}                 # resuming call id -> its run's first call
    asked: dict[str, str] = {}                   # approval request id -> sub-call id
    reported: set[tuple[str, str]] = set()
    for event in log:
        if isinstance(event, events.CodeApprovalUsed):
            run, approval = event.parent_call_id, event.approval_id
            if key is not None and not _holds(key, event):
                problems.append((event.seq, f"the record that run {run!r} used plan approval "
                                            f"{approval!r} (tool/code-approval-used) does "
                                            "not match its seal"))
                continue
            marked.add((approval, run))
            first = used_by.setdefault(approval, run)
            if first != run:
                problems.append((event.seq, f"plan approval {approval!r} was used again by "
                                            f"run {run!r}, after run {first!r} used it"))
        elif isinstance(event, events.ToolResumed):
            resumed[event.call_id] = resumed.get(event.run_id, event.run_id)
        elif isinstance(event, events.CodeDispatchStart):     # a resumption's: its run's
            run_of[event.sub_call_id] = resumed.get(event.parent_call_id,
                                                    event.parent_call_id)
        elif isinstance(event, events.ApprovalAsked) and isinstance(event.call_id, str):
            asked[event.id] = event.call_id
        elif isinstance(event, events.ApprovalDecided) and isinstance(event.by, str):
            found = BY.fullmatch(event.by)
            run = run_of.get(asked.get(event.id, ""), "")
            if found is None or not run or (found[1], run) in reported:
                continue
            approval = found[1]
            reported.add((approval, run))                  # once per run and approval
            if (approval, run) not in marked:
                problems.append((event.seq, f"run {run!r} had calls decided by plan approval "
                                            f"{approval!r} without a sealed record of its "
                                            "use (tool/code-approval-used)"))
            first = used_by.setdefault(approval, run)
            if first != run and (approval, run) not in marked:
                problems.append((event.seq, f"plan approval {approval!r} decided calls of "
                                            f"run {run!r} too, after run {first!r} used it"))
    return problems
