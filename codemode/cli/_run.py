"""One `codemode run` or `codemode resume`: build the session, run the program through
`run_code` (or resume a paused run), and keep what the report needs (the sandbox's outcome,
the log, each failed sub-call's code)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import msgspec

from codemode.pipeline import (
    ApprovalDecision,
    CallResult,
    LogCorruptError,
    ResumeError,
    Session,
    ToolDefinition,
    events,
)
from codemode.pipeline._resume import find_suspension
from codemode.sandbox import RunOutcome, RunRequest, Sandbox, SandboxLimits, WasmSandbox

from .._mcp.toolsets import gather_tools
from .._run.rejections import rejection_code
from .._run.run_code import CodeMode
from .._run.typecheck import TypeCheck
from ._echo import Echo, takes_on_output
from ._report import Rejection, RunReport, build_report

if TYPE_CHECKING:   # a run without --policy never loads the policy module
    from .._policy.policy import Policy
    from .._run.plan_approval import PlanApproval


class RecordingSandbox:
    """Runs programs in `inner` and keeps the last outcome, or what `inner` raised; with an
    `echo`, hands it the output as it is written when `inner.run` takes `on_output`."""

    def __init__(self, inner: Sandbox, echo: Echo | None = None) -> None:
        self.inner = inner
        self.echo = echo if echo is not None and takes_on_output(inner) else None
        self.outcome: RunOutcome | None = None
        self.failure: BaseException | None = None

    @property
    def allowed_modules(self) -> frozenset[str]:
        """The wrapped sandbox's."""
        return self.inner.allowed_modules

    def run(self, request: RunRequest, dispatch: Any, cancel: threading.Event | None = None,
            on_output: Callable[[str, str], None] | None = None) -> RunOutcome:
        """`inner.run`; `on_output` (a caller's) and the echo both get the output as it is
        written, when `inner.run` takes `on_output`."""
        self.outcome, self.failure = None, None
        takers = [f for f in (self.echo.piece if self.echo else None, on_output) if f]
        try:
            if takers and takes_on_output(self.inner):
                def each(stream: str, text: str) -> None:
                    for taker in takers:
                        taker(stream, text)
                run: Any = self.inner.run        # `on_output`: a newer sandbox's keyword
                self.outcome = run(request, dispatch, cancel, on_output=each)
            else:
                self.outcome = self.inner.run(request, dispatch, cancel)
        except Exception as exc:
            self.failure = exc
            raise
        return self.outcome


class OutputSoFar:
    """The program's output, printed as it is written (`echo`, when the sandbox hands it
    over: `_echo.py`) or kept for the end, and what it wrote before a stop signal
    (`_stop.py`) cancelled its run.

    `run_code` stops a cancelled run and waits (up to 2 s) for its sandbox to return, and
    the sandbox keeps the captured stdout and stderr however a run ends (`RunOutcome`): the
    recording sandbox holds them once the cancellation has unwound. The command sets it up
    before the run starts (`run_program`'s `so_far`) and prints the rest (`print_rest`)
    when the run ends or the stop reaches it.
    """

    def __init__(self, echo: Echo | None = None) -> None:
        self.sandbox: RecordingSandbox | None = None
        self.echo = echo

    def echoed(self) -> bool:
        """Wait until the echoed output is written; True when there was some (then the
        pieces were the whole output, and nothing more is printed)."""
        if self.echo is None:
            return False
        self.echo.close()
        return self.echo.used

    def streams(self) -> tuple[str, str]:
        """`(stdout, stderr)` of the last run, as far as it got; empty before it ran, and
        when its sandbox did not return in time."""
        outcome = self.sandbox.outcome if self.sandbox is not None else None
        return ("", "") if outcome is None else (outcome.stdout, outcome.stderr)


@dataclass
class Ran:
    """A finished run: the report, plus the session for presenters when drawing it."""

    report: RunReport
    session: Session


@dataclass
class _Setup:
    """A command-line session ready to run: its sandbox, `run_code`, and the observer's
    record of failed sub-calls."""

    session: Session
    sandbox: RecordingSandbox
    mode: CodeMode
    rejections: dict[str, Rejection]
    made: list[Path]
    """The log this setup made, while it is still removed when empty (`keep_log`)."""


async def _setup(stack: AsyncExitStack, *, mcp: list[str], builtin: bool, log: Path | None,
                 limits: SandboxLimits, policy: Policy | None,
                 own: Sequence[ToolDefinition], so_far: OutputSoFar | None,
                 keep_log: bool = True) -> _Setup:
    """The session, sandbox and `run_code` of a command (`stack` closes them). A log file
    the setup makes is removed again, when it holds no event, if the setup fails; with
    `keep_log` False also if what follows fails, until the caller clears `_Setup.made`."""
    tools = await gather_tools(stack, builtin=builtin, mcp=mcp, tools=own)
    made = _not_there(log)             # a log this setup makes: gone again if it fails
    stack.callback(_drop_if_empty, made)         # runs after the session closed it
    session = Session(tools=tools.builtin, log=str(log) if log else None)
    stack.push_async_callback(session.aclose)
    stack.callback(tools.attach(session))
    rejections: dict[str, Rejection] = {}

    def observe(execution: Any, result: CallResult) -> None:
        if result.is_error:
            rejections[execution.call_id] = Rejection(rejection_code(result), result.denied)

    session.on("tools/result", observe)
    echo = so_far.echo if so_far is not None else None
    if policy is not None:
        sandbox = RecordingSandbox(policy.build_sandbox(), echo)
        mode = msgspec.structs.replace(policy, limits=limits).apply(session, sandbox=sandbox)
        if any(rule.action == "ask" for rule in policy.rules):
            mode.seal_key.value()     # a run may pause: a key it could not seal with fails now
    else:
        sandbox = RecordingSandbox(WasmSandbox(), echo)
        mode = CodeMode(session, sandbox=sandbox, limits=limits)
    if so_far is not None:
        so_far.sandbox = sandbox
    if keep_log:
        made.clear()                   # set up: the log is the run's, whatever happens next
    return _Setup(session=session, sandbox=sandbox, mode=mode, rejections=rejections,
                  made=made)


def _not_there(log: Path | None) -> list[Path]:
    """[log] when it does not exist yet (setting up the run will make it), else []."""
    return [log] if log is not None and not log.exists() else []


def _drop_if_empty(made: list[Path]) -> None:
    """Remove the log a failed setup made (a refused policy, a key that cannot seal), when
    it holds no event, so that no empty log is left behind."""
    if not made:                       # the usual case: nothing to load for
        return
    from codemode.pipeline.log import load

    for log in made:
        try:
            if not load(log):
                for path in (log, *(log.with_name(log.name + side)      # SQLite's files
                                    for side in ("-wal", "-shm", "-journal"))):
                    path.unlink(missing_ok=True)
        except (OSError, ValueError, LogCorruptError):
            pass


def _report(setup: _Setup, result: CallResult, duration_s: float, limits: SandboxLimits,
            run_id: str, source: str = "") -> RunReport:
    log_events = setup.session.log.read()
    calls = [e for e in log_events if isinstance(e, events.ToolCall)]
    labels = setup.mode.labels(calls[-1].call_id) if calls else {}
    type_errors = setup.mode.type_errors(calls[-1].call_id) if calls else []
    return build_report(outcome=setup.sandbox.outcome, failure=setup.sandbox.failure,
                        result=result, log_events=log_events, labels=labels,
                        rejections=setup.rejections, type_errors=type_errors, source=source,
                        exposed={d.name for d in setup.mode.exposed_tools()},
                        duration_s=round(duration_s, 6), limits=limits, run_id=run_id)


async def run_program(source: str, title: str, *, mcp: list[str], builtin: bool,
                      log: Path | None, limits: SandboxLimits,
                      policy: Policy | None = None,
                      tools: Sequence[ToolDefinition] = (),
                      so_far: OutputSoFar | None = None,
                      type_check: str | None = None,
                      approval: PlanApproval | None = None) -> Ran:
    """Run `source` as one `run_code` call on a fresh session.

    Args:
        source: the program text.
        title: the call's `description` (the card's title).
        mcp: commands of MCP servers to start over stdio; their tools are exposed.
        builtin: also expose the built-in fixture toolset.
        log: the session log file (None: in memory).
        tools: the user's own tools (`--tools MODULE:ATTR`, loaded by the caller).
        limits: the run's limits (they replace the policy's: the caller merges them).
        policy: tier, exposed tools and rules; None: the wasm tier, every tool, no rules.
        so_far: filled in so that the caller can print what the program wrote when a stop
            signal cancels the run (`OutputSoFar`).
        type_check: "enforce", "warn" or "off" (`CodeMode(type_check=...)`), replacing the
            policy's; None: the policy's, else "enforce".
        approval: a plan approval to follow (`run_approved`: its seal is checked first,
            `ResumeTampered` before anything runs); `source` must be its program.
    Returns:
        The report (kind "pending" when the run paused for approval) and the session.
    Raises:
        McpStartError, LogInUseError, PolicyError, ...: the run could not be set up. A
        program that fails, or a sandbox that cannot run, is a report, never a raise.
    """
    async with AsyncExitStack() as stack:
        setup = await _setup(stack, mcp=mcp, builtin=builtin, log=log, limits=limits,
                             policy=policy, own=tools, so_far=so_far,
                             keep_log=approval is None)
        if type_check is not None:
            setup.mode.type_check = cast(TypeCheck, type_check)
        started = time.monotonic()
        if approval is not None:
            from .._run.plan_approval import run_approved
            # a refused approval (changed, used) leaves no new, empty log behind
            result = await run_approved(setup.mode, approval, description=title)
            setup.made.clear()
        else:
            result = await setup.session.call("run_code", {"code": source,
                                                          "description": title})
        duration_s = time.monotonic() - started
        calls = [e for e in setup.session.log.read() if isinstance(e, events.ToolCall)]
        run_id = calls[-1].call_id if calls else ""
        return Ran(report=_report(setup, result, duration_s, limits, run_id, source),
                   session=setup.session)


@dataclass(frozen=True)
class Decisions:
    """What `codemode resume` was told to decide.

    Attributes:
        approve: request ids (or bare sub-call numbers) to approve.
        deny: `ID[:REASON]` texts to deny (an id, or its number alone, and an optional
            reason after a colon).
        approve_all, deny_all: decide every request not named otherwise.
    """

    approve: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    approve_all: bool = False
    deny_all: bool = False


def _request_id(given: str, run_id: str, pending: list[str]) -> str:
    """The pending request `given` names: its id, or its number `n` alone.

    Raises:
        ResumeError: it names no pending request.
    """
    for candidate in (given, f"{run_id}:{given}"):
        if candidate in pending:
            return candidate
    raise ResumeError(f"no pending approval has the id {given!r} (pending: "
                      f"{', '.join(pending) or 'none'})")


def _split_reason(given: str, run_id: str, pending: list[str]) -> tuple[str, str]:
    """(request id, reason) of `ID[:REASON]`: the longest pending id (or number) `given`
    starts with, then the text after the colon that follows it.

    Raises:
        ResumeError: it starts with no pending request's id or number.
    """
    names = sorted([(p, p) for p in pending] + [(p.removeprefix(f"{run_id}:"), p)
                                               for p in pending],
                   key=lambda pair: -len(pair[0]))
    for name, request in names:
        if given == name:
            return request, ""
        if given.startswith(name + ":"):
            return request, given[len(name) + 1:]
    return _request_id(given, run_id, pending), ""


def decide(decisions: Decisions, run_id: str,
           pending: list[str]) -> list[ApprovalDecision]:
    """One `ApprovalDecision` per pending request id, from the command's options.

    `--deny ID:REASON` is split at the first `:` after a whole pending id (ids hold `:`).

    Raises:
        ResumeError: an option names no pending request, one is decided twice, or one is
            left undecided (no --approve-all / --deny-all).
    """
    chosen: dict[str, ApprovalDecision] = {}

    def put(decision: ApprovalDecision) -> None:
        if decision.id in chosen:
            raise ResumeError(f"approval {decision.id!r} is decided twice")
        chosen[decision.id] = decision

    for given in decisions.approve:
        put(ApprovalDecision(id=_request_id(given, run_id, pending), approved=True))
    for given in decisions.deny:
        request, reason = _split_reason(given, run_id, pending)
        if reason:
            put(ApprovalDecision(id=request, approved=False, reason=reason))
        else:
            put(ApprovalDecision(id=request, approved=False))
    rest = [r for r in pending if r not in chosen]
    if rest and (decisions.approve_all or decisions.deny_all):
        for request in rest:
            put(ApprovalDecision(id=request, approved=decisions.approve_all))
    elif rest:
        raise ResumeError(f"no decision for pending approval(s): {', '.join(rest)} (give "
                          "--approve ID or --deny ID for each, or --approve-all / --deny-all)")
    return [chosen[r] for r in pending]


async def resume_program(run_id: str, decisions: Decisions, *, mcp: list[str], builtin: bool,
                         log: Path, policy: Policy | None = None,
                         tools: Sequence[ToolDefinition] = (),
                         so_far: OutputSoFar | None = None) -> Ran:
    """Resume the paused run `run_id` of the session log `log` (`Session.resume`).

    Args:
        run_id: the paused run's id (`run_id` of its report).
        decisions: what to approve and deny.
        mcp, builtin, tools, policy: the toolset and policy, as the run had them (the resumed
            program must find the same tools; the rules decide its new calls).
        log: the session log the run paused in.
        so_far: as for `run_program`.
    Returns:
        The report of the resumed run (its stdout is the program's whole output; kind
        "pending" again when it paused again) and the session.
    Raises:
        ResumeError: no paused run `run_id` in the log, already resumed, or the decisions
            do not cover its requests.
        McpStartError, LogInUseError, PolicyError, ...: the session could not be set up.
    """
    async with AsyncExitStack() as stack:
        limits = policy.limits if policy is not None else SandboxLimits()
        setup = await _setup(stack, mcp=mcp, builtin=builtin, log=log, limits=limits,
                             policy=policy, own=tools, so_far=so_far)
        suspended, _ = find_suspension(setup.session.log.read(), run_id)
        pending = [r.id for r in suspended.requests]
        chosen = decide(decisions, run_id, pending)
        if isinstance(suspended.state, dict) and "limits" in suspended.state:
            try:                    # the resumed run keeps the limits it paused with
                limits = msgspec.convert(suspended.state["limits"], SandboxLimits)
            except msgspec.ValidationError:
                pass
        started = time.monotonic()
        result = await setup.session.resume(run_id, chosen)
        duration_s = time.monotonic() - started
        return Ran(report=_report(setup, result, duration_s, limits, run_id),
                   session=setup.session)
