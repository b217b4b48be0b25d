"""`codemode plan PROGRAM`: a dry run of a program (`CodeMode.plan`, docs/codemode.md "Plan
before the run"): read-only tools run, the others are planned, and the plan is printed.
With `--approve --out FILE`, the plan's asked entries are decided at once (`approve_plan`:
approved, but those `--deny N[:REASON]` names) and the sealed `PlanApproval` is written to
FILE as JSON, for `codemode run PROGRAM --approval FILE --log LOG` (one run per log)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ._options import (
    FUEL,
    MCP,
    MEMORY_MB,
    TIMEOUT,
    TOOLS,
    check_log,
    limits_of,
    load_own_tools,
    load_policy,
    read_program,
)

if TYPE_CHECKING:
    from codemode.sandbox import SandboxLimits

    from .._run.plan import Plan
    from .._run.plan_approval import PlanApproval

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
    "entries it made are printed all the same).\n\n"
    "--approve --out FILE decides every entry the policy asks about at once: approved, but "
    "those --deny N[:REASON] names (N is the entry's number), and writes the sealed "
    "approval to FILE (JSON) for codemode run PROGRAM --approval FILE --log LOG, which runs "
    "the program without asking again for those calls. An approval is used by one run per "
    "log, whatever that run's outcome: the log records its use, and a second run with the "
    "same log is refused before anything runs. The seal needs the seal key "
    "(CODEMODE_SEAL_KEY, CODEMODE_SEAL_KEY_FILE or the key file), as paused runs do. Nothing "
    "is written when the key cannot be used or a --deny names an entry that is not asked "
    "about (exit 2 for both), or when the program failed (exit 1).")

EXIT_OVER_QUOTA = 3
"""`codemode plan`'s exit status for a plan that exceeds a quota (`Plan.over_quota`)."""


def plan_command(
    program: Path = typer.Argument(
        ..., metavar="PROGRAM",
        help="The Python program (a UTF-8 file), or - to read it from stdin."),
    tools: list[str] = TOOLS,
    mcp: list[str] = MCP,
    builtin: bool = typer.Option(False, "--builtin",
                                 help="Expose the built-in fixture toolset too."),
    policy: Path | None = typer.Option(None, "--policy", metavar="FILE",
                                        help="Apply a policy file (TOML)."),
    timeout: float | None = TIMEOUT,
    memory_mb: int | None = MEMORY_MB,
    fuel: int | None = FUEL,
    log: Path | None = typer.Option(
        None, "--log", metavar="FILE",
        help="The session log the real run will use (.db or .jsonl): per-session quota use "
             "counts from it. It is read, never written."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
    approve: bool = typer.Option(
        False, "--approve",
        help="Approve every entry the policy asks about (but those --deny names) and write "
             "the sealed approval to --out."),
    deny: list[str] = typer.Option(
        [], "--deny", metavar="N[:REASON]",
        help="With --approve: deny entry N, with the reason the program's ToolDenied "
             "carries; repeatable."),
    out: Path | None = typer.Option(
        None, "--out", metavar="FILE",
        help="With --approve: where to write the approval (JSON); a file there that is "
             "not an approval is not overwritten."),
) -> None:
    """`codemode plan` (its help is `PLAN_HELP`)."""
    import asyncio

    from codemode.sandbox import SandboxLimits

    from .._run.plan import PlanFailed
    from .._run.seal import SealKeyError
    from ._options import setup_error, usage_error

    if (deny or out is not None) and not approve:
        raise usage_error("--deny and --out go with --approve")
    if approve and out is None:
        raise usage_error("--approve needs --out FILE, where the approval is written")
    if out is not None:                                             # before the dry run
        _check_out(out)
    check_log(log)
    denied = _denials(deny)
    loaded = load_policy(policy)
    limits = limits_of(loaded.limits if loaded else SandboxLimits(), timeout, memory_mb, fuel)
    own = load_own_tools(tools)
    source, _ = read_program(program)
    failure: str | None = None
    approval: PlanApproval | None = None
    try:
        made, approval = asyncio.run(_plan(source, mcp=mcp, builtin=builtin, policy=loaded,
                                           own=own, limits=limits, log=log,
                                           deny=denied if approve else None))
    except PlanFailed as exc:
        made, failure = exc.plan, str(exc)
    except SealKeyError as exc:
        raise usage_error(f"cannot seal the approval: {exc}") from None
    except _NotAsked as exc:
        raise usage_error(f"--deny: {exc}") from None
    except Exception as exc:    # MCP start failures, a policy that exposes no tool: no traceback
        raise setup_error(exc) from None
    _print(made, as_json, failure)
    if made.over_quota:         # the cause when a refused call failed the program too
        if approve:
            print("the plan exceeds a quota: no approval was written", file=sys.stderr)
        raise typer.Exit(EXIT_OVER_QUOTA)
    if failure is not None:
        if approve:
            print("the program failed: no approval was written", file=sys.stderr)
        raise typer.Exit(1)
    if approval is not None and out is not None:
        _write(approval, out)


def _denials(given: list[str]) -> dict[int, str]:
    """`{n: reason}` from `--deny N[:REASON]` texts.

    Raises:
        typer.BadParameter: one does not start with an entry number, or names one twice.
    """
    denied: dict[int, str] = {}
    for text in given:
        number, _, reason = text.partition(":")
        if not number.strip().isdigit():
            raise typer.BadParameter(f"{text!r} does not start with an entry number (N or "
                                     "N:REASON)", param_hint="'--deny'")
        if int(number) in denied:
            raise typer.BadParameter(f"entry {int(number)} is denied twice",
                                     param_hint="'--deny'")
        denied[int(number)] = reason
    return denied


def _check_out(out: Path) -> None:
    """`--out` may be written: its directory exists, and the file is new or an approval
    (planning again replaces it). Anything else there (the program, the session log, a
    file of the user's) is not overwritten.

    Raises:
        typer.Exit: (2, saying why) it may not."""
    import msgspec

    from .._run.approval_record import PlanApproval
    from ._options import usage_error

    if not out.absolute().parent.is_dir():
        raise usage_error(f"cannot write {str(out)!r}: its directory does not exist")
    if not out.exists():
        return
    try:
        msgspec.json.decode(out.read_bytes(), type=PlanApproval)
    except (OSError, msgspec.DecodeError):
        raise usage_error(f"--out: {str(out)!r} exists and is not a plan approval: it is "
                          "not overwritten (name a new file, or remove it)") from None


def _write(approval: PlanApproval, out: Path) -> None:
    import msgspec

    from ._options import usage_error

    try:
        out.write_bytes(msgspec.json.format(msgspec.json.encode(approval), indent=2) + b"\n")
    except OSError as exc:
        raise usage_error(f"cannot write {str(out)!r}: {exc.strerror or exc}") from None
    denied = sum(not e.approved for e in approval.entries)
    print(f"approval {approval.id} written to {out}: "
          f"{len(approval.entries) - denied} approved, {denied} denied", file=sys.stderr)


def load_approval(path: Path, source: str) -> PlanApproval:
    """The approval `codemode run --approval FILE` follows, read from `path`; its seal is
    checked by `run_approved`, before anything runs.

    Raises:
        typer.Exit: (status 2, saying why) the file cannot be read, is not an approval, or
            is for another program than `source`.
    """
    import msgspec

    from .._run.plan_approval import PlanApproval
    from ._options import usage_error

    try:
        approval = msgspec.json.decode(path.read_bytes(), type=PlanApproval)
    except OSError as exc:
        raise usage_error(f"cannot read the approval {str(path)!r}: "
                          f"{exc.strerror or exc}") from None
    except msgspec.DecodeError as exc:      # ValidationError too
        raise usage_error(f"{str(path)!r} is not a plan approval ({exc}); make one with "
                          "codemode plan PROGRAM --approve --out FILE") from None
    if approval.code != source:
        raise usage_error(f"the approval {str(path)!r} is for another program: the "
                          "program it holds is not this one (it was planned for another, or "
                          "the file was changed); nothing ran")
    return approval


def plan_first(source: str, *, mcp: list[str], builtin: bool, policy: Any,
               own: list[Any], limits: SandboxLimits,
               log: Path | None = None) -> PlanApproval | None:
    """`codemode run --plan-first`: dry-run `source` (with the run's `limits`), print its
    plan on stderr and ask once, on the terminal, whether to approve every entry the policy
    asks about. Per-session quota use counts from a copy of the run's `log`.

    Returns:
        The sealed approval to run with, or None when the plan asks about nothing (the
        program runs as usual).
    Raises:
        typer.Exit: 2 when stdin is not a terminal or the key cannot seal; 1 when the dry
            run failed, the plan exceeds a quota, or the answer was not yes (nothing ran
            for real).
    """
    import asyncio

    from .._run.plan import PlanFailed
    from .._run.seal import SealKeyError
    from ._options import setup_error, usage_error

    if not sys.stdin.isatty():
        raise usage_error("--plan-first asks on a terminal, and stdin is not one; write "
                          "an approval with codemode plan PROGRAM --approve --out FILE "
                          "and run it with --approval FILE --log LOG")
    answered: list[bool] = []

    def ask(plan: Plan) -> dict[int, str] | None:
        _print(plan, False, None, file=sys.stderr)
        if not plan.asked():
            return None
        sys.stderr.write(f"Approve these {len(plan.asked())} call(s), each to run once? "
                         "[y/N] ")
        sys.stderr.flush()
        answered.append(sys.stdin.readline().strip().lower() in ("y", "yes"))
        return {} if answered[-1] else None

    try:
        made, approval = asyncio.run(_plan(source, mcp=mcp, builtin=builtin, policy=policy,
                                           own=own, limits=limits, log=log, decide=ask))
    except PlanFailed as exc:
        _print(exc.plan, False, str(exc), file=sys.stderr)
        print("codemode: the dry run failed: nothing ran", file=sys.stderr)
        raise typer.Exit(1) from None
    except SealKeyError as exc:
        raise usage_error(f"cannot seal the approval: {exc}") from None
    except Exception as exc:    # MCP start failures, a policy that exposes no tool: no traceback
        raise setup_error(exc) from None
    if made.over_quota:                  # not asked: it could not be approved
        _print(made, False, None, file=sys.stderr)
        print("codemode: the plan exceeds a quota: nothing ran", file=sys.stderr)
        raise typer.Exit(1)
    if answered and not answered[-1]:
        print("codemode: not approved: nothing ran", file=sys.stderr)
        raise typer.Exit(1)
    return approval


def _copy_of(log: Path | None, folder: Path) -> Path:
    """A copy of the session log `log` in `folder`, for a dry run to count quota use from
    (the log itself is only read, whoever writes it); a new file's path when there is none.

    Raises:
        OSError, sqlite3.Error: `log` cannot be read.
        LogCorruptError: `log` is not a log (named as the user gave it, not the copy)."""
    from codemode.pipeline.log import load, log_format

    if log is None or not log.exists():
        return folder / "plan.jsonl"
    load(log)                           # read-only: refuses a file that is not a log
    copy = folder / f"plan{log.suffix}"
    if log_format(log) == "jsonl":      # its whole lines: a torn last one is a write under way
        data = log.read_bytes()
        copy.write_bytes(data[:data.rfind(b"\n") + 1])
        return copy
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(f"{log.resolve().as_uri()}?mode=ro", uri=True)) as source, \
            closing(sqlite3.connect(copy)) as target:
        source.backup(target)           # a consistent copy, also while a run writes the log
    return copy


async def _plan(source: str, *, builtin: bool, policy: Any, own: list[Any],
                limits: SandboxLimits, deny: dict[int, str] | None = None,
                mcp: list[str] | None = None, log: Path | None = None,
                decide: Callable[[Plan], dict[int, str] | None] | None = None,
                ) -> tuple[Plan, PlanApproval | None]:
    """The plan, and with `deny` (not None) its approval (`approve_plan`); or, with
    `decide`, the approval with the denials it gives for the plan (None: no approval). The
    dry run has `limits`, and counts quota use from a copy of `log` (`_copy_of`)."""
    import tempfile
    from contextlib import AsyncExitStack

    from .._run.plan_approval import approve_plan
    from ._quiet import host_prints_to_stderr
    from ._run import _setup

    async with AsyncExitStack() as stack:
        stack.enter_context(host_prints_to_stderr())   # a tool's print() is not the plan
        # A log the dry run alone writes (an ask rule needs one to be applied at all): a
        # copy of the run's, so that quota use counts from it.
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        setup = await _setup(stack, mcp=mcp or [], builtin=builtin,
                             log=_copy_of(log, folder), limits=limits,
                             policy=policy, own=own, so_far=None)
        if deny is not None or decide is not None:
            setup.mode.seal_key.value()       # a key that cannot seal: refused before the run
        made = await setup.mode.plan(source)
        if made.over_quota:           # it cannot be approved: the caller says why
            return made, None
        if decide is not None:
            deny = decide(made)
        if deny is None:
            return made, None
        try:
            return made, approve_plan(setup.mode, made, deny=deny)
        except ValueError as exc:              # a --deny of an entry that is not asked
            raise _NotAsked(str(exc)) from None


class _NotAsked(Exception):
    """`--deny` names an entry the plan does not ask about (`approve_plan`'s ValueError)."""


def _print(plan: Plan, as_json: bool, failure: str | None, file: Any = None) -> None:
    import msgspec

    from .._run.visible import visible

    if as_json:
        data = msgspec.to_builtins(plan)
        data["over_quota"] = [e.n for e in plan.over_quota]
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
                      + marks + _quota_text(entry)), file=file)
    asked = len(plan.asked())
    over = [str(e.n) for e in plan.over_quota]
    made = " before the program failed" if failure is not None else ""
    print(f"{len(plan.entries)} call(s) with effects{made}, {asked} to approve"
          + ("" if plan.complete else "; the program went on with simulated values, so the "
             "real run may differ")
          + (f"; {_entries(over)} a quota: the plan cannot be approved" if over else ""),
          file=file)
    if failure is not None:
        print(visible(failure), file=file)


def _entries(numbers: list[str]) -> str:
    """"entry 4 exceeds", "entries 2, 4 exceed"."""
    if len(numbers) == 1:
        return f"entry {numbers[0]} exceeds"
    return f"entries {', '.join(numbers)} exceed"


def _quota_text(entry: Any) -> str:
    """` [quota send_* per_run 2/3]` for each quota limit `entry` counts against."""
    return "".join(f" [quota {q.tool} {q.measure} {q.used}/{q.limit}"
                   + (" EXCEEDED" if q.exceeded else "") + "]" for q in entry.quota)
