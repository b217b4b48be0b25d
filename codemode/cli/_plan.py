"""`codemode plan PROGRAM`: a dry run of a program (`CodeMode.plan`, docs/codemode.md "Plan
before the run"): read-only tools run, the others are planned, and the plan is printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ._options import TOOLS, load_own_tools, load_policy

if TYPE_CHECKING:
    from .._run.plan import Plan

PLAN_SHORT_HELP = ("Dry-run a program: tools that only read run, the others do not; print "
                   "the calls with effects it would make and what the policy would do.")

PLAN_HELP = (
    "Dry-run a program in the sandbox. Tools that only read (read_only in their definition, "
    "an MCP readOnlyHint, or the policy's read_only list) run for real, through the policy; "
    "tools with effects do not run: the program gets a simulated value, and each such call "
    "is printed with its arguments and the policy's decision (allow, ask or deny, and why). "
    "An entry whose tool is said to be destructive or idempotent (@tool(destructive=..., "
    "idempotent=...), MCP destructiveHint/idempotentHint, the policy's destructive, additive "
    "and idempotent lists) is marked so. "
    "With the policy's quotas, each entry shows its quota use (used/limit after the call), "
    "and a call past a quota is refused as in the real run (deny, QUOTA_EXCEEDED). "
    "Exit status 0 when the program ended, 3 when the plan exceeds a quota (it cannot be "
    "approved; whether the program then ended or failed), else 1 when it failed (the "
    "entries it made are printed all the same).")

EXIT_OVER_QUOTA = 3
"""`codemode plan`'s exit status for a plan that exceeds a quota (`Plan.over_quota`)."""


def plan_command(
    program: Path = typer.Argument(..., metavar="PROGRAM",
                                   help="The Python program (a UTF-8 file)."),
    tools: list[str] = TOOLS,
    builtin: bool = typer.Option(False, "--builtin",
                                 help="Expose the built-in fixture toolset too."),
    policy: Path | None = typer.Option(None, "--policy", metavar="FILE",
                                        help="Apply a policy file (TOML)."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    """`codemode plan` (its help is `PLAN_HELP`)."""
    import asyncio

    from .._run.plan import PlanFailed

    loaded = load_policy(policy)
    own = load_own_tools(tools)
    try:
        source = program.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {str(program)!r}: {exc.strerror or exc}.",
                                 param_hint="'PROGRAM'") from None
    failure: str | None = None
    try:
        made = asyncio.run(_plan(source, builtin=builtin, policy=loaded, own=own))
    except PlanFailed as exc:
        made, failure = exc.plan, str(exc)
    _print(made, as_json, failure)
    if made.over_quota:         # the cause when a refused call failed the program too
        raise typer.Exit(EXIT_OVER_QUOTA)
    if failure is not None:
        raise typer.Exit(1)


async def _plan(source: str, *, builtin: bool, policy: Any, own: list[Any]) -> Plan:
    import tempfile
    from contextlib import AsyncExitStack

    from codemode.sandbox import SandboxLimits

    from ._run import _setup

    async with AsyncExitStack() as stack:
        limits = policy.limits if policy is not None else SandboxLimits()
        # A log the dry run alone reads (an ask rule needs one to be applied at all).
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        setup = await _setup(stack, mcp=[], builtin=builtin, log=folder / "plan.jsonl",
                             limits=limits,
                             policy=policy, own=own, so_far=None)
        return await setup.mode.plan(source)


def _print(plan: Plan, as_json: bool, failure: str | None) -> None:
    import msgspec

    from .._run.visible import visible

    if as_json:
        data = msgspec.to_builtins(plan)
        if failure is not None:
            data["failure"] = failure
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return
    for entry in plan.entries:
        arguments = json.dumps(entry.arguments, ensure_ascii=False, sort_keys=True)
        why = f": {entry.reason}" if entry.reason else ""
        marks = "".join(f" [{word}]" for word, said in (
            ("destructive", entry.destructive), ("idempotent", entry.idempotent)) if said)
        print(visible(f"{entry.n}. {entry.tool}({arguments}) -> {entry.decision}{why}"
                      + marks + _quota_text(entry)))
    asked = len(plan.asked())
    over = [str(e.n) for e in plan.over_quota]
    print(f"{len(plan.entries)} call(s) with effects, {asked} to approve"
          + ("" if plan.complete else "; later calls used simulated values, so the real "
             "run may differ")
          + (f"; entries {', '.join(over)} exceed a quota: the plan cannot be approved"
             if over else ""))
    if failure is not None:
        print(visible(failure))


def _quota_text(entry: Any) -> str:
    """` [quota send_* per_run 2/3]` for each quota limit `entry` counts against."""
    return "".join(f" [quota {q.tool} {q.measure} {q.used}/{q.limit}"
                   + (" EXCEEDED" if q.exceeded else "") + "]" for q in entry.quota)
