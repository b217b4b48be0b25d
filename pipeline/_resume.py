"""What ``Session.resume`` hands a resumed call's body (docs/pipeline-spec.md §4.3)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from ._errors import ResumeError
from .events import ApprovalDecision, PendingApproval, ToolResult, ToolResumed, ToolSuspended

__all__ = ["Resumption", "find_suspension", "normalize_decisions"]


class Resumption(msgspec.Struct, frozen=True, kw_only=True):
    """A suspended call being resumed.

    Attributes:
        run_id: the run's stable id (the first call's id); ids derived from it, such as
            approval request ids and idempotency keys, stay the same across resumptions.
        call_id: the resuming call's id (``"<run id>:resume:<k>"``).
        state: the tool's own state, as it logged it in ``tool/suspended``.
        decisions: one per pending request, in the order the requests were listed.
        requests: the requests the suspension waited on.
    """

    run_id: str
    call_id: str
    state: Any
    decisions: tuple[ApprovalDecision, ...]
    requests: tuple[PendingApproval, ...]


def normalize_decisions(
    decisions: Mapping[str, bool] | Iterable[ApprovalDecision],
    requests: tuple[PendingApproval, ...],
) -> tuple[ApprovalDecision, ...]:
    """Decisions as ``ApprovalDecision``s in the order of ``requests``.

    Args:
        decisions: ``{request id: approved}`` or ``ApprovalDecision``s (a denial may carry
            a reason).
        requests: what the suspension waits on; every one needs exactly one decision.
    Raises:
        ResumeError: a decision names no pending request, names one twice, or a request
            has no decision.
    """
    given = (
        [ApprovalDecision(id=str(k), approved=bool(v)) for k, v in decisions.items()]
        if isinstance(decisions, Mapping)
        else list(decisions)
    )
    by_id: dict[str, ApprovalDecision] = {}
    wanted = {r.id for r in requests}
    for decision in given:
        if not isinstance(decision, ApprovalDecision):
            raise ResumeError(f"a decision must be an ApprovalDecision, not {decision!r}")
        if decision.id not in wanted:
            raise ResumeError(
                f"no pending approval has the id {decision.id!r} (pending: "
                f"{', '.join(sorted(wanted)) or 'none'})"
            )
        if decision.id in by_id:
            raise ResumeError(f"approval {decision.id!r} is decided twice")
        by_id[decision.id] = decision
    missing = [r.id for r in requests if r.id not in by_id]
    if missing:
        raise ResumeError(f"no decision for pending approval(s): {', '.join(missing)}")
    return tuple(by_id[r.id] for r in requests)


CRASHED = "TOOL_OUTCOME_UNKNOWN"
"""The code crash repair gives a call that never got its result: a resumption whose call
ended so did not use its suspension up (`find_suspension`)."""


def find_suspension(events: Iterable[Any], run_id: str) -> tuple[ToolSuspended, int]:
    """The latest ``tool/suspended`` of ``run_id`` and how many times the run was resumed.

    A resumption whose call crashed (crash repair answered it ``TOOL_OUTCOME_UNKNOWN``)
    does not use the suspension: it may be resumed again (the approved calls that ran
    before the crash may run again, with the same idempotency keys).

    Raises:
        ResumeError: the log has no suspension of ``run_id``, or its latest one was
            already resumed.
    """
    latest: ToolSuspended | None = None
    resumed = 0
    consumed = False
    resuming: str | None = None         # the call id of the latest resumption
    for event in events:
        if isinstance(event, ToolSuspended) and event.run_id == run_id:
            latest, consumed = event, False
        elif isinstance(event, ToolResumed) and event.run_id == run_id:
            resumed += 1
            consumed, resuming = True, event.call_id
        elif isinstance(event, ToolResult) and resuming is not None \
                and event.call_id == resuming and _crashed(event):
            consumed = False
    if latest is None:
        raise ResumeError(f"the log holds no suspended run {run_id!r}")
    if consumed:
        raise ResumeError(f"run {run_id!r} was already resumed; an approval is used once")
    return latest, resumed


def _crashed(result: ToolResult) -> bool:
    return result.error is not msgspec.UNSET and result.error.code == CRASHED
