"""How `codemode serve` settles a call that asks for approval: put to the MCP client as a
form elicitation, denied, or paused. Apart from the server (`serve`), whose listeners only
find the request a call belongs to and hand its context here.

Approval. A call a `tools/pre-execute` listener answers with `Ask` (a policy's `ask` rule)
is put to the MCP client as a form elicitation naming the tool and its arguments, with one
boolean field `approve`: accepted with `approve: true` runs the call once; `false` or a
decline denies it; a cancel, or no answer within `approval_timeout_s`, cancels it. A client
that cannot be asked (no `elicitation` capability, or a connection that carries no server
requests) gets a denial saying so, without a request being sent.

Pausing (`approvals`): with "auto", a program's sub-call that asks, from a client that
cannot be asked, pauses the run instead (docs/codemode.md "Pausing for approval"); with
"defer", every such sub-call does, and nobody is elicited. A paused run is resumed with
`resume_run` (`resume`). A direct call (mode "both") that asks is never paused: it is
elicited or denied as above.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Literal

from codemode.pipeline import ApprovalRequest, Ask, Deny, Execution, thaw

from .._run.visible import visible

__all__ = ["APPROVAL_SCHEMA", "Approvals", "ask_client", "cannot_elicit", "on_ask"]

_log = logging.getLogger("codemode.serve")

Approvals = Literal["elicit", "auto", "defer"]
"""How the server gets a sub-call's approval: "elicit" asks the client (a client that
cannot be asked gets a denial); "auto" asks it when it can, else pauses the run; "defer"
always pauses the run. Pausing lists `resume_run`."""

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve",
                               "description": "true runs this call once; false denies it"}},
    "required": ["approve"],
}
"""The form an approval elicitation asks the client to fill in."""


def cannot_elicit(ctx: Any) -> str | None:
    """Why the client of the request `ctx` cannot be asked for approval, or None when it
    can."""
    session = ctx.session
    capabilities = session.client_capabilities
    if capabilities is None or capabilities.elicitation is None:
        return ("the MCP client did not declare the elicitation capability, "
                "so it cannot be asked")
    elicitation = capabilities.elicitation
    if elicitation.form is None and elicitation.url is not None:
        return "the MCP client accepts only URL elicitations, not forms"
    if not session.can_send_request:
        return (f"this MCP connection (protocol {session.protocol_version}) cannot carry "
                "a request from the server to the client")
    return None


async def _elicit(ctx: Any, message: str) -> Any:
    return await ctx.session.elicit_form(message, APPROVAL_SCHEMA,
                                         related_request_id=ctx.request_id)


def on_ask(decision: Ask, execution: Execution, ctx: Any | None,
           approvals: Approvals) -> Ask | Deny:
    """The decision for a call a listener asked about: paused (`Ask(defer=True)`) as
    `approvals` says, denied when the client cannot be asked, else `decision` (elicited).

    Args:
        ctx: the request context of the MCP call the call belongs to (None: not one the
            server serves).
    """
    why = cannot_elicit(ctx) if ctx is not None else None
    if execution.parent is not None and ctx is not None and (
            approvals == "defer" or (approvals == "auto" and why)):
        return Ask(decision.reason, defer=True)     # the run pauses for it
    if why is not None:
        asked = f" ({decision.reason})" if decision.reason else ""
        return Deny(f'tool "{execution.name}" requires approval{asked}, but {why}')
    return decision


async def ask_client(ctx: Any, request: ApprovalRequest, arguments: Any,
                     timeout_s: float) -> str:
    """Elicit the approval of `request` (its call's frozen `arguments`) from the client of
    the request `ctx`: the outcome, "unavailable" when it cannot be asked or the
    elicitation failed, "cancelled" when no answer came within `timeout_s`."""
    if cannot_elicit(ctx) is not None:
        return "unavailable"
    # what the client shows a person: nothing in it may hide or reorder text (`visible`)
    shown = visible(json.dumps(thaw(arguments), ensure_ascii=False, indent=2))
    message = (f'Approve the tool call "{visible(request.tool_name, lines=False)}" with '
               f"these arguments?\n{shown}")
    if request.reason:
        message += f"\nReason: {visible(request.reason, lines=False)}"
    try:
        answer = await asyncio.wait_for(_elicit(ctx, message), timeout_s)
    except TimeoutError:
        return "cancelled"
    except Exception:
        _log.warning("the approval elicitation for %r failed", request.tool_name,
                     exc_info=True)
        return "unavailable"
    if answer.action == "accept":
        approved = (answer.content or {}).get("approve") is True
        return "allowed-once" if approved else "rejected"
    return "rejected" if answer.action == "decline" else "cancelled"
