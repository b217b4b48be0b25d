"""The `resume_run` tool of `codemode serve`: its schema, its description, and what its
arguments name. Apart from the server (`serve`), which lists it and runs `Session.resume`
like any call it serves.

A paused `run_code` succeeds with `structuredContent` `{"status": "pending", "run_id",
"approvals": [{"id", "toolName", "arguments", "reason"?}], "logs", "stderr"?, "subcalls",
"labels"?}`, and the tool `resume_run` (`{"run_id", "approve": [id], "deny": [{"id",
"reason"?}]}`, listed only then) resumes it with `Session.resume`, answering as `run_code`
does. Whoever calls `resume_run` approves: a client must keep it away from its model.
"""

from __future__ import annotations

from typing import Any

from codemode.pipeline import ApprovalDecision, ResumeError, Session
from codemode.pipeline._resume import find_suspension

__all__ = ["RESUME_DESCRIPTION", "RESUME_RUN", "RESUME_RUN_PARAMETERS", "resume_arguments",
           "resume_target"]

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

RESUME_DESCRIPTION = (
    "Resume a run_code run that paused for approval (its result has status \"pending\"): "
    "approve or deny each request it waits on, by id. The program goes on where it stopped "
    "(its earlier tool calls are not run again) and the result is that of run_code. Whoever "
    "calls this tool approves the requests: it is for the person or application that "
    "decides, not for the model.")


def resume_target(session: Session,
                  arguments: dict[str, Any]) -> tuple[str, list[ApprovalDecision], str]:
    """The run `resume_run`'s arguments resume in `session`: (run id, decisions, the call id
    `Session.resume` gives the resumption).

    Raises:
        ResumeError: the arguments do not have the shape of `RESUME_RUN_PARAMETERS`, or the
            log holds no paused run of that id.
    """
    run_id, decisions = resume_arguments(arguments)
    _, resumed = find_suspension(session.log.read(), run_id)
    return run_id, decisions, f"{run_id}:resume:{resumed + 1}"


def resume_arguments(arguments: dict[str, Any]) -> tuple[str, list[ApprovalDecision]]:
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
