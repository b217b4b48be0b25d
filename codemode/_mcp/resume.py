"""The `resume_run` tool of `codemode serve`: its schema, its description, and what its
arguments name. Apart from the server (`serve`), which lists it and runs `Session.resume`
like any call it serves.

A paused `run_code` succeeds with `structuredContent` `{"status": "pending", "run_id",
"approvals": [{"id", "toolName", "arguments", "reason"?}], "logs", "stderr"?, "subcalls",
"labels"?}`, and the tool `resume_run` (`{"run_id", "approve": [id], "deny": [{"id",
"reason"?}]}`, listed only then) resumes it with `Session.resume`, answering as `run_code`
does.

The approval token. A decision comes from a person or an approver the operator set up,
never from the model, which may see `resume_run` listed: the operator gives the server a
secret (`read_approval_token`: `--approval-token-file PATH` or `CODEMODE_APPROVAL_TOKEN`),
and the approving client sends it outside the tool's arguments, in the `tools/call`
request's `_meta` under `APPROVAL_TOKEN_META`. A call without it, or with another value
(`token_refusal`, compared with `hmac.compare_digest`), is an error result that decides
nothing: the run stays paused. Without a configured token every call is refused so.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codemode.pipeline import ApprovalDecision, ResumeError, Session
from codemode.pipeline._resume import find_suspension

from .._run.seal import weak_secret

__all__ = ["APPROVAL_TOKEN_ENV", "APPROVAL_TOKEN_META", "RESUME_DESCRIPTION", "RESUME_RUN",
           "RESUME_RUN_PARAMETERS", "ApprovalTokenError", "check_approval_token",
           "read_approval_token",
           "resume_arguments", "resume_target", "token_refusal"]

RESUME_RUN = "resume_run"

APPROVAL_TOKEN_META = "codemode/approvalToken"
"""The `_meta` key of a `resume_run` request that carries the operator's approval token."""

APPROVAL_TOKEN_ENV = "CODEMODE_APPROVAL_TOKEN"
"""The environment variable `codemode serve` reads the approval token from (when no
`--approval-token-file` is given)."""



class ApprovalTokenError(ValueError):
    """The approval token cannot be read, or is too weak to guard approvals."""


def read_approval_token(path: str | Path | None = None,
                        environ: Mapping[str, str] | None = None) -> str | None:
    """The operator's approval token, read once: the contents of the file `path` (surrounding
    whitespace removed), else `environ[APPROVAL_TOKEN_ENV]` (default `os.environ`), else
    None (no token: `resume_run` refuses every decision).

    Raises:
        ApprovalTokenError: the file cannot be read, or the token has fewer than 32
            characters or fewer than 10 different ones (make one with
            `python -c "import secrets; print(secrets.token_urlsafe(32))"`).
    """
    if path is not None:
        try:
            token = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ApprovalTokenError(f"cannot read the approval token file {str(path)!r}: "
                                     f"{exc}") from None
        where = f"the approval token file {str(path)!r}"
    else:
        found = (os.environ if environ is None else environ).get(APPROVAL_TOKEN_ENV)
        if found is None:
            return None
        token, where = found.strip(), APPROVAL_TOKEN_ENV
    return check_approval_token(token, where)


def check_approval_token(token: str, where: str = "the approval token") -> str:
    """`token`, when it is strong enough to guard approvals.

    Raises:
        ApprovalTokenError: not a string, or weak by the rule of seal keys
            (`seal.weak_secret`: at least 32 bytes, 96 bits of entropy in them); `where`
            names its source in the message.
    """
    why = weak_secret(token.encode(), "approval token") if isinstance(token, str) \
        else "it is not a string"
    if why is not None:
        raise ApprovalTokenError(
            f"{where} holds a weak approval token: {why} (make one with: python "
            "-c \"import secrets; print(secrets.token_urlsafe(32))\")")
    return token


def token_refusal(meta: Mapping[str, Any] | None, token: str | None) -> str | None:
    """Why a `resume_run` request whose `_meta` is `meta` may not decide anything, or None
    when it carries `token` under `APPROVAL_TOKEN_META` (`token` None: every request is
    refused, with how to configure one)."""
    if token is None:
        return ("resume_run decides nothing: this server has no approval token. Start "
                "codemode serve with --approval-token-file PATH (or the environment variable "
                f"{APPROVAL_TOKEN_ENV}) and have the approving client send the token in the "
                f'tools/call request\'s _meta["{APPROVAL_TOKEN_META}"]; the run stays paused')
    given = meta.get(APPROVAL_TOKEN_META) if isinstance(meta, Mapping) else None
    if isinstance(given, str) and hmac.compare_digest(given.encode("utf-8", "replace"),
                                                      token.encode("utf-8")):
        return None
    return ("resume_run decides nothing without the operator's approval token in the "
            f'tools/call request\'s _meta["{APPROVAL_TOKEN_META}"] (approvals come from a '
            "person or the operator's approver, not from the model); the run stays paused")

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
    "(its earlier tool calls are not run again) and the result is that of run_code. It "
    "decides only with the operator's approval token, which the approving application "
    "sends outside the arguments: it is for the person or application that decides, not "
    "for the model.")


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
