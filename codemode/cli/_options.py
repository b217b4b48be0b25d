"""What the commands share: the options that name a setup (tools, policy, log, report) and
loading what they name, each failure a usage error: one line on stderr, exit status 2."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ._console import print_error

if TYPE_CHECKING:
    from codemode.pipeline import ToolDefinition

    from .._policy.policy import Policy

EXIT_USAGE = 2

TOOLS = typer.Option(
    [], "--tools", metavar="MODULE:ATTR",
    help="Expose your own tools: ATTR of MODULE (imported from the working directory, as "
         "python -m does) is a @codemode.tool, a list of them, or a function of no "
         "arguments returning them, e.g. --tools mytools:TOOLS; repeatable.")

JSON_REPORT = typer.Option(
    False, "--json",
    help="Print a JSON report on stdout (with the program's output) and nothing else.")
TABLE = typer.Option(
    None, "--table/--no-table",
    help="Draw the card and sub-call table on stderr (default: when it is a terminal).")
LOG = typer.Option(
    None, "--log", metavar="FILE",
    help="Append the session's events to this file (.db or .jsonl) in an existing directory.")


def usage_error(message: str) -> typer.Exit:
    """`error: message` on stderr; the `typer.Exit` (status 2) to raise."""
    print_error("error", message)
    return typer.Exit(EXIT_USAGE)


def check_log_directory(log: Path | None) -> None:
    """Raises:
        typer.BadParameter: `--log` names a file in a directory that does not exist."""
    if log is not None and not log.parent.is_dir():
        raise typer.BadParameter(f"directory {str(log.parent)!r} does not exist.",
                                 param_hint="'--log'")


def load_policy(policy: Path | None) -> Policy | None:
    """The policy file loaded, or None without one.

    Raises:
        typer.Exit: 2, after printing why the file is not a valid policy."""
    if policy is None:
        return None
    from .._policy.policy import Policy, PolicyError

    try:
        return Policy.load(policy)
    except PolicyError as exc:
        print_error("invalid policy", str(exc))
        raise typer.Exit(EXIT_USAGE) from None


def load_own_tools(specs: list[str]) -> list[ToolDefinition]:
    """The tools `--tools MODULE:ATTR` options name (`codemode._mcp.toolsets.load_tools`).

    Raises:
        typer.Exit: 2, after printing why a spec names no tools."""
    if not specs:
        return []
    from .._mcp.toolsets import ToolsSpecError, load_tools

    try:
        return load_tools(specs)
    except ToolsSpecError as exc:
        raise usage_error(f"--tools: {exc}") from None
