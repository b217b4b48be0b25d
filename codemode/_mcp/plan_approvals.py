"""How `codemode serve --approve-plans` settles a program's calls that ask for approval: one
elicitation for the whole plan (docs/codemode.md "Plan before the run"), instead of one per
call. Apart from the server (`serve`), which hands each `run_code` call here first.

A `run_code` call is first dry-run (`CodeMode.plan`). A plan with entries the policy asks
about is put to the MCP client as ONE form elicitation listing them (`plan_message`: each
entry's number, tool, arguments and the policy's reason, every text escaped with
`visible`), with the fields of `PLAN_APPROVAL_SCHEMA`: `approve` (true: run the approved
entries; false: deny every entry), `deny` (entry numbers to deny, comma separated) and
`reason` (what the denied calls' `ToolDenied` says). The decisions are sealed
(`approve_plan`) and the program runs for real following them (`run_approved`): an
approved call runs once without another ask, a denied one is a binding rejection the
program sees, and a call off the plan goes through the policy as usual (and is elicited on
its own). A decline denies every entry; a cancel, no answer within the timeout, an answer
whose `deny` is not entry numbers of the plan, or a dry run that fails runs nothing and is
an error result.

Not here (`plan_first` answers None, and the server makes the call as without the
option): arguments that are not a program (the call reports them), a client that cannot
be asked (today's behaviour under the server's `approvals`), a plan with no entry to ask
about (the program just runs).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from codemode.pipeline import CallResult

from .._run.plan import Plan, PlanEntry, PlanFailed, PlanOverQuota
from .._run.plan_approval import approve_plan, run_approved
from .._run.seal import SealKeyError
from .._run.visible import visible
from .approvals import cannot_elicit

__all__ = ["PLAN_APPROVAL_SCHEMA", "plan_first", "plan_message"]

_log = logging.getLogger("codemode.serve")

PLAN_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Approve",
                    "description": "true runs every listed call once, but those in deny; "
                                   "false denies them all"},
        "deny": {"type": "string", "title": "Deny",
                 "description": "entry numbers to deny, comma separated (e.g. 2, 4); "
                                "empty: none"},
        "reason": {"type": "string", "title": "Reason",
                   "description": "why the denied calls are denied (the program is told)"},
    },
    "required": ["approve"],
}
"""The form a plan's elicitation asks the client to fill in."""


def plan_message(plan: Plan, asked: list[PlanEntry]) -> str:
    """The elicitation's text: one line per asked entry, `n. tool(arguments) (reason)`,
    nothing in it able to hide or reorder text (`visible`)."""
    lines = [f"Approve these {len(asked)} tool calls of one program at once? Each approved "
             "call runs once, with exactly these arguments:"]
    for entry in asked:
        arguments = json.dumps(entry.arguments, ensure_ascii=False, sort_keys=True)
        reason = f" ({entry.reason})" if entry.reason else ""
        lines.append(visible(f"{entry.n}. {entry.tool}({arguments}){reason}", lines=False))
    if not plan.complete:
        lines.append("The plan may be incomplete: the program went on with simulated "
                     "values, and a call that is not listed is asked about on its own.")
    return "\n".join(lines)


def _denied(content: dict[str, Any], asked: list[PlanEntry]) -> dict[int, str] | str:
    """`{n: reason}` from an accepted answer, or why it cannot be read."""
    reason = content.get("reason") if isinstance(content.get("reason"), str) else ""
    reason = reason or "denied when the plan was approved"
    numbers = {e.n for e in asked}
    if content.get("approve") is not True:
        return dict.fromkeys(numbers, reason)
    given = content.get("deny")
    denied: dict[int, str] = {}
    if not isinstance(given, str):
        return denied
    for part in (p.strip() for p in given.split(",")):
        if not part:
            continue
        if not part.isdigit() or int(part) not in numbers:
            return (f"the answer's deny field names {part!r}, not one of the entries "
                    f"{sorted(numbers)}")
        denied[int(part)] = reason
    return denied


async def plan_first(mode: Any, ctx: Any, arguments: Any, *, agent: str, call_id: str,
                     timeout_s: float) -> CallResult | None:
    """Run the `run_code` call (`arguments`) of the MCP request `ctx` under one approval of
    its plan, elicited from the client (the module docstring).

    Args:
        mode: the server's `CodeMode`.
        agent, call_id: the agent and call id the real run is called with.
        timeout_s: seconds the client may take to answer (then nothing runs).
    Returns:
        The run's result (a failure result when nothing ran), or None when the plan route
        does not apply and the call is to be made as usual.
    """
    code = arguments.get("code") if isinstance(arguments, dict) else None
    if not isinstance(code, str) or cannot_elicit(ctx) is not None:
        return None
    try:
        plan = await mode.plan(code, agent=agent)
    except PlanFailed as exc:
        if not exc.plan.over_quota:      # else the quota is why: said below
            return CallResult.failure(f"{exc} (nothing ran for real)")
        plan = exc.plan
    if plan.over_quota:
        return CallResult.failure(f"{PlanOverQuota(plan.over_quota)}; nothing ran",
                                  code="QUOTA_EXCEEDED")
    asked = plan.asked()
    if not asked:
        return None
    try:
        answer = await asyncio.wait_for(ctx.session.elicit_form(
            plan_message(plan, asked), PLAN_APPROVAL_SCHEMA,
            related_request_id=ctx.request_id), timeout_s)
    except TimeoutError:
        return CallResult.failure("no answer to the plan's approval in time; nothing ran",
                                  code="APPROVAL_FAILED")
    except Exception as exc:
        _log.warning("the plan's approval elicitation failed", exc_info=True)
        return CallResult.failure(f"the plan's approval could not be asked "
                                  f"({type(exc).__name__}); nothing ran",
                                  code="APPROVAL_FAILED")
    if answer.action == "cancel":
        return CallResult.failure("the plan's approval was cancelled; nothing ran",
                                  code="APPROVAL_FAILED")
    content = answer.content if answer.action == "accept" else {"approve": False}
    denied = _denied(dict(content or {}), asked)
    if isinstance(denied, str):
        return CallResult.failure(f"{denied}; nothing ran", code="APPROVAL_FAILED")
    try:
        approval = approve_plan(mode, plan, deny=denied)
    except SealKeyError as exc:
        return CallResult.failure(f"the plan's approval cannot be sealed: {exc}; nothing "
                                  "ran", code=exc.code)
    description = arguments.get("description")
    return await run_approved(mode, approval, agent=agent, call_id=call_id,
                              description=description if isinstance(description, str)
                              else None)
