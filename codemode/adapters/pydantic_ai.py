"""pydantic-ai: `CodeModeToolset`, a toolset whose one tool, `run_code`, runs through a
codemode session (docs/integrations.md). Needs the `pydantic-ai` extra.

    session = Session(tools=[...])
    toolset = CodeModeToolset(session, policy=Policy.load("policy.toml"))
    agent = Agent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])

Each `run_code` call is `session.call("run_code", ...)` as `agent` (default
"pydantic-ai"): the program's sub-calls go through the session's pipeline and log. A
program that fails is a `ToolFailed` (the model sees the error and adapts; no retry is
spent); a success returns the rendered output, the text the other integrations show.

Approvals are mapped onto pydantic-ai's deferred tools (`defer_approvals=True`, the
default), by pausing the run (docs/codemode.md "Pausing for approval"). A sub-call that a
`tools/pre-execute` listener answers with `Ask` (a policy's `ask` rule) is deferred: when
the program waits only on such calls, the run pauses and `run_code` raises
`ApprovalRequired` with metadata `{"run_id": str, "approvals": [{"id", "toolName",
"arguments", "reason"?, "shown"}]}` (`shown`: the call as one line to show the person who
decides, its invisible and bidirectional characters escaped; `toolName` and `arguments` are
the data), so the agent run ends with a `DeferredToolRequests` holding the
`run_code` call (its `code` argument is the program to review). The calls the program made
before it paused have run, once.

Approved (`DeferredToolResults(approvals={id: True})`), the call comes back with
`ctx.tool_call_approved` and the toolset resumes the paused run with `Session.resume`,
approving every request of it; `DeferredToolResults.metadata[id]` may say otherwise per
request: `{"deny": {request id: reason or None}}` denies those (the program gets
`ToolDenied`). The program replays from its start: its earlier calls are answered from the
log and do not run again. The result is the resumed run's, which may pause again
(`ApprovalRequired` once more). `ToolApproved(override_args=...)` that change the program
fail the call (`ToolFailed`): a paused run resumes with its own program.

Denied (`False` / `ToolDenied`), pydantic-ai tells the model without calling the tool, so
nothing more of the program runs: the run stays paused in the session log (what ran before
the pause stays done). The toolset maps the `run_code` call id to the run id in memory
(dropped when the run resumes or the toolset closes); it does not survive the process. An
application that resumes in another process, on a session with the same log, passes the
metadata back: `DeferredToolResults(approvals={id: True}, metadata={id:
requests.metadata[id]})` carries the `run_id`. With `defer_approvals=False`, asks go to the
session's own approval channel and nothing pauses, unless the session has no approver: a
run that pauses then raises `ApprovalRequired` just the same.

One approval for a whole plan (`approve_plans=True`, docs/codemode.md "Plan before the
run"): a `run_code` call is first dry-run (`CodeMode.plan`); when its plan has calls the
policy asks about, nothing runs for real and `run_code` raises `ApprovalRequired` once,
with metadata `{"plan": {"complete": bool, "entries": [{"n", "toolName", "arguments",
"reason"?, "shown"}]}}` (the asked entries; `shown` as above). The plan stays in the
toolset's memory, keyed by the tool call id: the approval is made there, never from what
the model sends. Approved (`True` / `ToolApproved()`), the entries are decided at once
(`approve_plan`): approved, but those `DeferredToolResults.metadata[id]["deny"]` maps from
an entry number (`n`, int or its digits) to a reason (or None); then the program runs for
real following them (`run_approved`): each approved call runs once without pausing, a
denied one raises `ToolDenied` in the program, and a call not in the plan is deferred as
usual (the run may still pause). Denied (`False` / `ToolDenied(message)`), nothing of the
program runs. A plan with nothing to ask about runs at once; a dry run that fails is a
`ToolFailed`, and nothing runs for real.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired, ToolFailed
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from codemode._policy.policy import Policy
from codemode._run.plan import Plan, PlanFailed, PlanOverQuota
from codemode._run.plan_approval import approve_plan, run_approved
from codemode._run.render import shown_request
from codemode._run.run_code import RUN_CODE, RUN_CODE_PARAMETERS, CodeMode
from codemode._run.seal import SealKeyError
from codemode.pipeline import (
    ApprovalDecision,
    Ask,
    CallResult,
    Execution,
    ResumeError,
    Session,
)
from codemode.pipeline._resume import find_suspension
from codemode.sandbox import SandboxLimits

from ._common import result_text

__all__ = ["CodeModeToolset"]

_ANY = SchemaValidator(schema=core_schema.any_schema())   # the pipeline validates arguments

KEPT_PLANS = 1024
"""Plans waiting for their approval a toolset keeps (`approve_plans`); past it, the oldest
is forgotten, and its approval then runs the program as without the option."""


class CodeModeToolset(AbstractToolset[Any]):
    """A pydantic-ai toolset exposing `run_code` of a codemode session.

    Args:
        session: the session whose tools programs call; `run_code` must not be reserved on
            it yet: the toolset reserves it (applying `policy` when given) after installing
            its own listeners, so it sees every approval ask.
        policy: the policy to apply (tier, limits, exposed tools, rules).
        limits: the run limits when there is no policy (default: `SandboxLimits()`).
        agent: the session agent the calls run as (approval needs one).
        defer_approvals: map approval asks onto pydantic-ai's deferred tool approvals by
            pausing the run (the module docstring); runs then record their clocks and
            randomness, so that they replay exactly. False: leave asks to the session's
            approval channel.
        max_retries: how often the model may retry `run_code` after a `ModelRetry`.
        id: the toolset's id (unique among an agent's toolsets).
        approve_plans: dry-run each program first and ask for one approval of every call
            its plan asks about (the module docstring).

    Attributes:
        code_mode: the `CodeMode` that reserved `run_code`.
    """

    def __init__(self, session: Session, *, policy: Policy | None = None,
                 limits: SandboxLimits | None = None, agent: str = "pydantic-ai",
                 defer_approvals: bool = True, max_retries: int = 1,
                 id: str | None = None, approve_plans: bool = False) -> None:
        self.session = session
        self.agent = agent
        self.defer_approvals = defer_approvals
        self.approve_plans = approve_plans
        self._plans: dict[str, Plan] = {}        # tool call id -> its plan, to be approved
        self.max_retries = max_retries
        self._id = id
        self._paused: dict[str, str] = {}        # pydantic-ai tool call id -> run id
        self._disposers: list[Callable[[], None]] = []
        if defer_approvals:
            self._disposers.append(session.on("tools/pre-execute", self._defer))
        self.code_mode = (policy.apply(session) if policy is not None
                          else CodeMode(session, limits=limits))
        if defer_approvals:
            self.code_mode.resumable = True
        self._disposers.append(self.code_mode.close)

    @property
    def id(self) -> str | None:
        return self._id

    def close(self) -> None:
        """Remove `run_code` and the listeners this toolset installed on the session."""
        for dispose in reversed(self._disposers):
            dispose()
        self._disposers.clear()
        self._plans.clear()

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        definition = ToolDefinition(name=RUN_CODE,
                                    description=self.code_mode.description(self.agent),
                                    parameters_json_schema=dict(RUN_CODE_PARAMETERS))
        return {RUN_CODE: ToolsetTool(toolset=self, tool_def=definition,
                                      max_retries=self.max_retries, args_validator=_ANY)}

    def paused_run(self, tool_call_id: str) -> str | None:
        """The run id of the paused run behind a `run_code` call (by pydantic-ai's tool call
        id), or None; kept in memory until the run resumes or the toolset closes."""
        return self._paused.get(tool_call_id)

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> Any:
        """Run the program, or resume its paused run when pydantic-ai brings the call back
        approved (the module docstring).

        Returns:
            The rendered output (the text the model reads).
        Raises:
            ApprovalRequired: the run paused, waiting for approval (metadata `{"run_id",
                "approvals"}`), or, with `approve_plans`, its plan needs one (`{"plan"}`).
            ToolFailed: the program failed (its dry run too), or the paused run cannot be
                resumed (already resumed, an unknown request id in the metadata, changed
                arguments), or the plan cannot be approved as asked (an unknown entry,
                changed arguments).
        """
        tool_call_id = ctx.tool_call_id or "call"
        metadata = ctx.tool_call_metadata if isinstance(ctx.tool_call_metadata, Mapping) \
            else {}
        run_id = self._paused.get(tool_call_id) or (
            metadata.get("run_id") if isinstance(metadata.get("run_id"), str) else None)
        plan = self._plans.pop(tool_call_id, None) if ctx.tool_call_approved else None
        if plan is None and self.approve_plans and not ctx.tool_call_approved:
            await self._ask_for_plan(tool_call_id, tool_args)   # raises when it must ask
        if plan is not None:
            result = await self._run_plan(plan, tool_call_id, tool_args, metadata)
        elif ctx.tool_call_approved and run_id is not None:
            try:
                result = await self._resume(run_id, tool_args, metadata)
            except ResumeError as exc:
                raise ToolFailed(f"Error: the paused run {run_id} cannot be resumed: "
                                 f"{exc}") from None
            self._paused.pop(tool_call_id, None)
        else:
            call_id = f"{tool_call_id}-{uuid.uuid4().hex[:8]}"
            result = await self.session.call(name, tool_args, agent=self.agent,
                                             call_id=call_id)
        value = result.value if not result.is_error else None
        if isinstance(value, Mapping) and value.get("status") == "pending":
            self._paused[tool_call_id] = str(value["run_id"])
            raise ApprovalRequired(metadata={"run_id": str(value["run_id"]),
                                             "approvals": [_with_shown(a)
                                                           for a in value["approvals"]]})
        if result.is_error:
            raise ToolFailed(result_text(result))
        return result_text(result)

    async def _ask_for_plan(self, tool_call_id: str, tool_args: dict[str, Any]) -> None:
        """Dry-run the program; when its plan has entries the policy asks about, keep the
        plan and raise `ApprovalRequired` for it (else return: the program just runs).

        Raises:
            ApprovalRequired: metadata `{"plan": {"complete", "entries"}}`.
            ToolFailed: the dry run failed, or the plan exceeds a quota (nothing ran).
        """
        code = tool_args.get("code")
        if not isinstance(code, str):
            return                                  # the call itself reports it
        try:
            plan = await self.code_mode.plan(code, agent=self.agent)
        except PlanFailed as exc:
            if not exc.plan.over_quota:  # else the quota is why: said below
                raise ToolFailed(f"Error: {exc} (nothing ran for real)") from None
            plan = exc.plan
        if plan.over_quota:
            raise ToolFailed(f"Error: {PlanOverQuota(plan.over_quota)}; nothing ran")
        asked = plan.asked()
        if not asked:
            return
        self._plans[tool_call_id] = plan
        while len(self._plans) > KEPT_PLANS:             # plans never approved: the oldest go
            del self._plans[next(iter(self._plans))]
        entries = []
        for entry in asked:
            shown: dict[str, Any] = {"n": entry.n, "toolName": entry.tool,
                                     "arguments": entry.arguments}
            if entry.reason:
                shown["reason"] = entry.reason
            entries.append(_with_shown(shown))
        raise ApprovalRequired(metadata={"plan": {"complete": plan.complete,
                                                  "entries": entries}})

    async def _run_plan(self, plan: Plan, tool_call_id: str, tool_args: dict[str, Any],
                        metadata: Mapping[str, Any]) -> CallResult:
        """Approve `plan` (denying what `metadata["deny"]` names) and run it.

        Raises:
            ToolFailed: the arguments are not the planned program's, or `deny` names no
                asked entry or is not a mapping; nothing ran.
        """
        if tool_args.get("code") != plan.code:
            raise ToolFailed("Error: an approved plan runs its own program; the approval "
                             "changed the code (nothing ran)")
        given = metadata.get("deny") or {}
        try:
            if not isinstance(given, Mapping):
                raise ValueError('metadata "deny" must map entry numbers to reasons '
                                 "(or None)")
            deny = {int(n): reason if isinstance(reason, str) else ""
                    for n, reason in given.items()}
            approval = approve_plan(self.code_mode, plan, deny=deny)
        except (TypeError, ValueError, SealKeyError) as exc:
            raise ToolFailed(f"Error: the plan cannot be approved so: {exc} (nothing "
                             "ran)") from None
        return await run_approved(self.code_mode, approval, agent=self.agent,
                                  call_id=f"{tool_call_id}-{uuid.uuid4().hex[:8]}")

    async def _resume(self, run_id: str, tool_args: dict[str, Any],
                      metadata: Mapping[str, Any]) -> CallResult:
        """Resume `run_id`, approving each request but those `metadata["deny"]` names.

        Raises:
            ResumeError: no paused run `run_id`, already resumed, other arguments than the
                paused call's, or a denial naming no request.
        """
        suspended, _ = find_suspension(self.session.log.read(), run_id)
        if isinstance(suspended.arguments, Mapping) and \
                suspended.arguments.get("code") != tool_args.get("code"):
            raise ResumeError("a paused run resumes with its own program; the approval "
                              "changed the code")
        deny = metadata.get("deny") or {}
        if not isinstance(deny, Mapping):
            raise ResumeError('metadata "deny" must map request ids to reasons (or None)')
        wanted = {r.id for r in suspended.requests}
        unknown = sorted(set(deny) - wanted)
        if unknown:
            raise ResumeError(f"no pending approval has the id {unknown[0]!r} (pending: "
                              f"{', '.join(sorted(wanted))})")
        decisions = []
        for request in suspended.requests:
            reason = deny.get(request.id)
            if request.id not in deny:
                decisions.append(ApprovalDecision(id=request.id, approved=True))
            elif isinstance(reason, str) and reason:
                decisions.append(ApprovalDecision(id=request.id, approved=False, reason=reason))
            else:
                decisions.append(ApprovalDecision(id=request.id, approved=False))
        return await self.session.resume(run_id, decisions)

    async def _defer(self, execution: Execution, next: Callable[[], Any]) -> Any:
        """A program's sub-call that asks is deferred: its run pauses (this toolset's
        agent only; direct calls are left to the session's channel)."""
        decision = await next()
        if isinstance(decision, Ask) and execution.parent is not None \
                and execution.agent == self.agent:
            return Ask(decision.reason, defer=True)
        return decision


def _with_shown(request: Mapping[str, Any]) -> dict[str, Any]:
    """An approval request of a paused run, with `shown`: what a person is shown of it,
    one line whose invisible and bidirectional characters are escapes (`visible`)."""
    return {**request, "shown": shown_request(request)}
