"""What the commands share: the options that name a setup (tools, policy, log, report) and
loading what they name, each failure a usage error: one line on stderr, exit status 2."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import typer

from ._console import print_error

if TYPE_CHECKING:
    from codemode.pipeline import ToolDefinition
    from codemode.sandbox import SandboxLimits

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
MCP = typer.Option(
    [], "--mcp", metavar="CMD",
    help='Start an MCP server over stdio and expose its tools, e.g. '
         '--mcp "mcp-server-time"; repeatable.')
TIMEOUT = typer.Option(
    None, "--timeout", metavar="SECONDS",
    help="Wall-clock limit of the run in seconds (default 10, or the policy's).")
MEMORY_MB = typer.Option(
    None, "--memory-mb", metavar="MIB",
    help="Memory limit of the run in MiB (default 256, or the policy's).")
FUEL = typer.Option(
    None, "--fuel", metavar="N",
    help="Fuel budget of the run in wasm fuel units (default none, or the policy's).")
LOG = typer.Option(
    None, "--log", metavar="FILE",
    help="Append the session's events to this file (.db or .jsonl) in an existing directory.")


def usage_error(message: str) -> typer.Exit:
    """`error: message` on stderr; the `typer.Exit` (status 2) to raise."""
    print_error("error", message)
    return typer.Exit(EXIT_USAGE)


def setup_error(exc: Exception) -> typer.Exit:
    """`usage_error` for what stopped a command before its work began (an MCP server that
    did not start, a log in use or of an unknown kind, a policy that exposes no tool): our
    typed errors keep their name (`LogInUseError: ...`); a builtin's (`ValueError`,
    `OSError`) would say nothing its message does not, so it is left out."""
    name = type(exc).__name__
    return usage_error(str(exc) if type(exc).__module__ == "builtins" and str(exc)
                       else f"{name}: {exc}")


_OPTION_OF = {"wall_clock_s": "--timeout", "memory_bytes": "--memory-mb", "fuel": "--fuel"}
_BOUNDS = {"--timeout": "more than 0 and at most 86400 seconds (a day)",
           "--memory-mb": "between 16 and 4096 MiB", "--fuel": "a positive number"}


def limits_of(base: SandboxLimits, timeout: float | None, memory_mb: int | None,
              fuel: int | None) -> SandboxLimits:
    """`base` (the policy's limits, or the defaults) with the limits given as options."""
    import msgspec

    from codemode.sandbox import SandboxLimits

    given: dict[str, Any] = {}
    if timeout is not None:
        given["wall_clock_s"] = timeout
    if memory_mb is not None:
        given["memory_bytes"] = memory_mb << 20
    if fuel is not None:
        given["fuel"] = fuel
    try:
        return msgspec.convert({**msgspec.to_builtins(base), **given}, SandboxLimits)
    except msgspec.ValidationError as exc:
        field = str(exc).rsplit("$.", 1)[-1].rstrip("`")
        if field in _OPTION_OF and field in given:
            option = _OPTION_OF[field]
            raise typer.BadParameter(f"{option} must be {_BOUNDS[option]}") from None
        raise typer.BadParameter(str(exc)) from None


def read_program(program: Path) -> tuple[str, str]:
    """The program's text and its title: the file's name, or `<stdin>` for `-`. At most
    `MAX_CODE_BYTES` are read (a larger program is a usage error, whatever its source:
    `/dev/zero` or an endless pipe), so the limit of the run (`code_bytes`) decides the
    rest."""
    from codemode.sandbox._limits import MAX_CODE_BYTES

    from .._policy.bounded import TooLarge, read_bounded

    source: Path | BinaryIO = sys.stdin.buffer if str(program) == "-" else program
    title, where = ("<stdin>", "stdin") if str(program) == "-" else (program.name, str(program))
    try:
        data = read_bounded(source, MAX_CODE_BYTES)
    except TooLarge:
        raise usage_error(f"{where} is larger than {MAX_CODE_BYTES >> 20} MiB, the most a "
                           "program may be") from None
    except FileNotFoundError:
        raise typer.BadParameter(f"file {str(program)!r} does not exist.",
                                 param_hint="'PROGRAM'") from None
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {str(program)!r}: "
                                 f"{exc.strerror or exc}.", param_hint="'PROGRAM'") from None
    try:
        return data.decode("utf-8-sig"), title
    except UnicodeDecodeError as exc:
        raise usage_error(f"{where} is not valid UTF-8 (byte {exc.start}); save the program "
                           "as UTF-8") from None


def check_log(log: Path | None, param: str = "'--log'") -> None:
    """Checks `--log` (or the option or argument `param` names) before anything starts:
    the run, serve and the dry run would each fail on it later, after work was done or
    shown.

    Raises:
        typer.BadParameter: `--log` names a file of an unknown type, a directory or
            another file that is not a regular one (`check_log_path`: a FIFO would hang),
            or a file in a directory that does not exist."""
    if log is None:
        return
    import os

    from codemode.pipeline import LogError
    from codemode.pipeline.log import check_log_path

    try:
        check_log_path(log)
    except (IsADirectoryError, LogError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint=param) from None
    directory = Path(os.path.realpath(log)).parent      # a symbolic link's target's
    if not directory.is_dir():
        raise typer.BadParameter(f"directory {str(directory)!r} does not exist.",
                                 param_hint=param)


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
    from ._quiet import host_prints_to_stderr

    try:
        with host_prints_to_stderr():      # a module that prints as it is imported
            return load_tools(specs)
    except ToolsSpecError as exc:
        raise usage_error(f"--tools: {exc}") from None
