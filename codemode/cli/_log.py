"""`codemode log check FILE` and `codemode log show FILE`: reading session logs.

Reads a JSONL or SQLite log without opening it for writing (no lock, no crash repair) and
prints one line per violation, `seq <n>: <KIND>: <message>`, in log order. Exit status: 0
when the log keeps every invariant, 1 when it breaks any, 2 when it cannot be read.
`--partial` checks a log that is still being written (or crashed and was not reopened):
what is open at its end is then no violation.

With the seal key (`--seal-key-file`, else `CODEMODE_SEAL_KEY`, `CODEMODE_SEAL_KEY_FILE` or
the default key file, when it exists) the seals are checked too (`resumptions.seal_problems`:
paused runs' records, the decisions resumptions applied, a record used twice, the answers
resumptions left), one line each, `seq <n>: SEAL: <message>`; and the plan approvals'
uses (`approval_uses.approval_problems`: an approval used by two runs, calls decided by one
without its sealed marker, a marker whose seal does not match), `seq <n>: APPROVAL:
<message>` (the seal of a marker is checked only with the key).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ._help import _Command, _Group

# The pipeline and the tree's renderer load when a `log` command runs, not with `codemode`.
log_app = typer.Typer(cls=_Group, no_args_is_help=True, help="Inspect session logs.")


@log_app.command("show", cls=_Command,
                 short_help="Show a session log's calls as a tree, with outcomes and "
                            "durations.")
def show_command(
    file: Path = typer.Argument(..., metavar="FILE", help="A session log (.jsonl or .db)."),
    as_json: bool = typer.Option(False, "--json", help="Print the tree as JSON."),
) -> None:
    """Show a session log's calls as a tree (call -> sub-calls) with outcomes, codes,
    durations and approvals."""
    from ._log_show import show

    show(file, as_json)


@log_app.command(
    "check",
    cls=_Command,
    short_help="Check that a session log keeps its invariants.",
    help="Check that a session log keeps its invariants: every call "
    "answered once, results only for calls made, dispatch events inside turns, "
    "sub-calls settled under their root; each plan approval used by one run; with the seal "
    "key, every seal of paused runs, their resumptions' decisions and answers, and of plan "
    "approvals' uses. Exit 0: sound; 1: violations; 2: unreadable, or a "
    "seal key that cannot be used.",
)
def check_command(
    file: Path = typer.Argument(..., help="A session log (.jsonl, or .db/.sqlite)."),
    partial: bool = typer.Option(
        False,
        "--partial",
        help="The log may still be written: open turns, calls and "
        "sub-calls at its end are not violations.",
    ),
    seal_key_file: Path | None = typer.Option(
        None, "--seal-key-file", metavar="FILE",
        help="Check seals with the key in FILE (default: CODEMODE_SEAL_KEY, "
        "CODEMODE_SEAL_KEY_FILE, or the default key file when it exists).",
    ),
) -> None:
    """Print the violations of one log (module docstring); exit 0, 1 or 2."""
    from codemode.pipeline import LogError
    from codemode.pipeline.log import check, load, lock_file

    try:
        events = load(file)
    except (LogError, OSError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    from ._log_show import say_torn

    say_torn(file)
    found = [(v.seq, v.kind.value, v.message) for v in check(events, complete=not partial)]
    found += _seal_problems(events, seal_key_file)
    for seq, kind, message in found:            # the log's invariants, then its seals
        typer.echo(f"seq {seq}: {kind}: {message}")
    if found:
        typer.echo(f"{file}: {len(found)} violation(s) in {len(events)} events", err=True)
        if not partial and Path(lock_file(file)).exists():
            typer.echo(f"note: {lock_file(file)} exists: a session may be writing this log, "
                       "whose open turn and calls are then no violation; check it with "
                       "--partial, or once the session is closed", err=True)
        raise typer.Exit(1)
    typer.echo(f"{file}: {len(events)} events, no violations")


def _seal_problems(events: list[Any], key_file: Path | None) -> list[tuple[int, str, str]]:
    """The seal problems of `events` (kind "SEAL") and the plan approvals' (kind
    "APPROVAL"), in log order; seals are not checked (said on stderr) when no key is at hand.

    Raises:
        typer.Exit: (2) the key cannot be used."""
    from codemode._run.approval_uses import approval_problems
    from codemode._run.resumptions import seal_problems
    from codemode._run.seal import SealKeyError
    from codemode.pipeline import events as kinds

    records = any(isinstance(e, (kinds.ToolSuspended, kinds.CodeResumed)) for e in events)
    approvals = any(isinstance(e, kinds.CodeApprovalUsed) or (
        isinstance(e, kinds.ApprovalDecided) and isinstance(e.by, str)) for e in events)
    if not (records or approvals):
        return []
    key = _key(key_file)
    try:
        found = [(seq, "SEAL", m) for seq, m in seal_problems(events, key)] \
            if key is not None and records else []
        found += [(seq, "APPROVAL", m) for seq, m in approval_problems(events, key)]
    except SealKeyError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    return sorted(found, key=lambda problem: problem[0])


def _key(key_file: Path | None) -> Any:
    """The seal key to check with, or None (said on stderr) when none is at hand: checking
    never makes a key.

    Raises:
        typer.Exit: (2) the key cannot be used."""
    import os

    from codemode._run.seal import KEY_ENV, KEY_FILE_ENV, SealKey, SealKeyError, default_key_path

    if key_file is None and not os.environ.get(KEY_ENV):
        named = os.environ.get(KEY_FILE_ENV)
        key_file = Path(named) if named else default_key_path()
        if not key_file.exists():
            typer.echo(f"seals not checked: no seal key ({KEY_ENV}, {KEY_FILE_ENV} or "
                       f"{default_key_path()})", err=True)
            return None
    try:
        return SealKey() if key_file is None else SealKey(path=_existing(key_file))
    except SealKeyError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def _existing(path: Path) -> Path:
    if not path.exists():
        raise typer.BadParameter(f"no key file {str(path)!r}", param_hint="'--seal-key-file'")
    return path

