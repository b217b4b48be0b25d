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
default). A program stops at its first sub-call that a `tools/pre-execute` listener
answers with `Ask` (a policy's `ask` rule): the run is aborted and `run_code` raises
`ApprovalRequired` with metadata `{"calls": [{"tool", "arguments", "reason"}]}`, so the
agent run ends with a `DeferredToolRequests` holding the `run_code` call (its `code`
argument is the program to review). Resumed with that call approved
(`DeferredToolResults(approvals={id: True})`), the program runs again from the start, and
every sub-call in it that asks is allowed once; denied, pydantic-ai tells the model so
without running it. Sub-calls the program made before the one that asked run again in the
approved run. With `defer_approvals=False`, asks go to the session's own approval channel.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired, ToolFailed
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from codemode._calls import CallIndex
from codemode._policy import Policy
from codemode._run_code import RUN_CODE, RUN_CODE_PARAMETERS, CodeMode
from codemode.pipeline import ApprovalRequest, Session, Signal, thaw
from codemode.sandbox import SandboxLimits

from ._common import result_text

__all__ = ["CodeModeToolset"]

_ANY = SchemaValidator(schema=core_schema.any_schema())   # the pipeline validates arguments


@dataclass
class _Run:
    """One `run_code` call in flight: whether its asks are pre-approved, what it asked."""

    approved: bool
    signal: Signal
    asked: list[dict[str, Any]] = field(default_factory=list)


class CodeModeToolset(AbstractToolset[Any]):
    """A pydantic-ai toolset exposing `run_code` of a codemode session.

    Args:
        session: the session whose tools programs call; `run_code` must not be reserved on
            it yet: the toolset reserves it (applying `policy` when given) after installing
            its own listeners, so it sees every approval ask.
        policy: the policy to apply (tier, limits, exposed tools, rules).
        limits: the run limits when there is no policy (default: `SandboxLimits()`).
        agent: the session agent the calls run as (approval needs one).
        defer_approvals: map approval asks onto pydantic-ai's deferred tool approvals (see
            the module docstring); an approval channel is mounted on the session if it has
            none. False: leave asks to the session's approval channel.
        max_retries: how often the model may retry `run_code` after a `ModelRetry`.
        id: the toolset's id (unique among an agent's toolsets).

    Attributes:
        code_mode: the `CodeMode` that reserved `run_code`.
    """

    def __init__(self, session: Session, *, policy: Policy | None = None,
                 limits: SandboxLimits | None = None, agent: str = "pydantic-ai",
                 defer_approvals: bool = True, max_retries: int = 1,
                 id: str | None = None) -> None:
        self.session = session
        self.agent = agent
        self.defer_approvals = defer_approvals
        self.max_retries = max_retries
        self._id = id
        self._runs: dict[str, _Run] = {}
        self._index = CallIndex(session)
        self._disposers: list[Callable[[], None]] = [self._index.close]
        if defer_approvals:
            self._disposers.append(session.on("approval/answer", self._answer))
            if session.approval is None:
                self._disposers.append(session.mount_approval("ask"))
        self.code_mode = (policy.apply(session) if policy is not None
                          else CodeMode(session, limits=limits))
        self._disposers.append(self.code_mode.close)

    @property
    def id(self) -> str | None:
        return self._id

    def close(self) -> None:
        """Remove `run_code` and the listeners this toolset installed on the session."""
        for dispose in reversed(self._disposers):
            dispose()
        self._disposers.clear()

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        definition = ToolDefinition(name=RUN_CODE,
                                    description=self.code_mode.description(self.agent),
                                    parameters_json_schema=dict(RUN_CODE_PARAMETERS))
        return {RUN_CODE: ToolsetTool(toolset=self, tool_def=definition,
                                      max_retries=self.max_retries, args_validator=_ANY)}

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> Any:
        call_id = f"{ctx.tool_call_id or 'call'}-{uuid.uuid4().hex[:8]}"
        run = _Run(approved=bool(ctx.tool_call_approved), signal=Signal())
        self._runs[call_id] = run
        try:
            result = await self.session.call(name, tool_args, agent=self.agent,
                                             call_id=call_id, signal=run.signal)
        finally:
            del self._runs[call_id]
        if run.asked:
            raise ApprovalRequired(metadata={"calls": run.asked})
        if result.is_error:
            raise ToolFailed(result_text(result))
        return result_text(result)

    async def _answer(self, request: ApprovalRequest, next: Callable[[], Any]) -> Any:
        seen = self._index.get(request.call_id)
        run = self._runs.get(seen.root_call_id) if seen is not None else None
        if run is None or seen is None:
            return await next()
        if run.approved:
            return "allowed-once"
        run.asked.append({"tool": request.tool_name, "arguments": thaw(seen.arguments),
                          "reason": request.reason})
        run.signal.abort("approval required")     # stop the program at its first ask
        return "cancelled"
