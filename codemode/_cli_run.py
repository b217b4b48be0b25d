"""One `codemode run`: build the session, run the program through `run_code`, and keep what
the report needs (the sandbox's outcome, the log, each failed sub-call's code)."""

from __future__ import annotations

import threading
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from codemode.pipeline import CallResult, Session
from codemode.sandbox import RunOutcome, RunRequest, Sandbox, SandboxLimits, WasmSandbox

from ._policy import Policy
from ._rejections import rejection_code
from ._run_code import CodeMode
from ._run_report import Rejection, RunReport, build_report
from ._toolsets import gather_tools


class RecordingSandbox:
    """Runs programs in `inner` and keeps the last outcome, or what `inner` raised."""

    def __init__(self, inner: Sandbox) -> None:
        self.inner = inner
        self.outcome: RunOutcome | None = None
        self.failure: BaseException | None = None

    @property
    def allowed_modules(self) -> frozenset[str]:
        """The wrapped sandbox's."""
        return self.inner.allowed_modules

    def run(self, request: RunRequest, dispatch: Any,
            cancel: threading.Event | None = None) -> RunOutcome:
        self.outcome, self.failure = None, None
        try:
            self.outcome = self.inner.run(request, dispatch, cancel)
        except Exception as exc:
            self.failure = exc
            raise
        return self.outcome


@dataclass
class Ran:
    """A finished run: the report, plus the session for presenters when drawing it."""

    report: RunReport
    session: Session


async def run_program(source: str, title: str, *, mcp: list[str], builtin: bool,
                      log: Path | None, limits: SandboxLimits,
                      policy: Policy | None = None) -> Ran:
    """Run `source` as one `run_code` call on a fresh session.

    Args:
        source: the program text.
        title: the call's `description` (the card's title).
        mcp: commands of MCP servers to start over stdio; their tools are exposed.
        builtin: also expose the built-in fixture toolset.
        log: the session log file (None: in memory).
        limits: the run's limits (they replace the policy's: the caller merges them).
        policy: tier, exposed tools and rules; None: the wasm tier, every tool, no rules.
    Raises:
        McpStartError, LogInUseError, PolicyError, ...: the run could not be set up. A
        program that fails, or a sandbox that cannot run, is a report, never a raise.
    """
    async with AsyncExitStack() as stack:
        tools = await gather_tools(stack, builtin=builtin, mcp=mcp)
        session = Session(tools=tools, log=str(log) if log else None)
        stack.push_async_callback(session.aclose)
        rejections: dict[str, Rejection] = {}

        def observe(execution: Any, result: CallResult) -> None:
            if result.is_error:
                rejections[execution.call_id] = Rejection(rejection_code(result), result.denied)

        session.on("tools/result", observe)
        if policy is not None:
            sandbox = RecordingSandbox(policy.build_sandbox())
            mode = msgspec.structs.replace(policy, limits=limits).apply(session, sandbox=sandbox)
        else:
            sandbox = RecordingSandbox(WasmSandbox())
            mode = CodeMode(session, sandbox=sandbox, limits=limits)
        started = time.monotonic()
        result = await session.call("run_code", {"code": source, "description": title})
        duration_s = time.monotonic() - started
        report = build_report(outcome=sandbox.outcome, failure=sandbox.failure, result=result,
                              log_events=session.log.read(), rejections=rejections,
                              exposed={d.name for d in mode.exposed_tools()},
                              duration_s=round(duration_s, 6), limits=limits)
        return Ran(report=report, session=session)
