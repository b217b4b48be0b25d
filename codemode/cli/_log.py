"""`codemode log check FILE` and `codemode log show FILE`: reading session logs.

Reads a JSONL or SQLite log without opening it for writing (no lock, no crash repair) and
prints one line per violation, `seq <n>: <KIND>: <message>`, in log order. Exit status: 0
when the log keeps every invariant, 1 when it breaks any, 2 when it cannot be read.
`--partial` checks a log that is still being written (or crashed and was not reopened):
what is open at its end is then no violation.
"""

from __future__ import annotations

from pathlib import Path

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
    "sub-calls settled under their root. Exit 0: sound; 1: violations; 2: unreadable.",
)
def check_command(
    file: Path = typer.Argument(..., help="A session log (.jsonl, or .db/.sqlite)."),
    partial: bool = typer.Option(
        False,
        "--partial",
        help="The log may still be written: open turns, calls and "
        "sub-calls at its end are not violations.",
    ),
) -> None:
    """Print the violations of one log (module docstring); exit 0, 1 or 2."""
    from codemode.pipeline import LogCorruptError
    from codemode.pipeline.log import check, load

    try:
        events = load(file)
    except (LogCorruptError, OSError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    violations = check(events, complete=not partial)
    for violation in violations:
        typer.echo(f"seq {violation.seq}: {violation.kind.value}: {violation.message}")
    if violations:
        typer.echo(f"{file}: {len(violations)} violation(s) in {len(events)} events", err=True)
        raise typer.Exit(1)
    typer.echo(f"{file}: {len(events)} events, no violations")
