"""The `codemode` command line: `run`, `resume`, `demo`, `describe`, `plan`, `eval`, `serve`,
`log` and `cache`.

    codemode run PROGRAM.py|- [--tools MODULE:ATTR]... [--mcp CMD]... [--builtin]
                              [--policy FILE] [--timeout S] [--memory-mb MIB] [--fuel N]
                              [--log FILE] [--json] [--table/--no-table]
                              [--approval FILE (with --log) | --plan-first]
    codemode resume LOG RUN_ID [--approve ID]... [--deny ID[:REASON]]... [--approve-all]
                               [--deny-all] [--tools MODULE:ATTR]... [--mcp CMD]...
                               [--builtin] [--policy FILE] [--json] [--table/--no-table]
    codemode demo [--log FILE]
    codemode plan PROGRAM.py|- [--tools MODULE:ATTR]... [--mcp CMD]... [--builtin]
                               [--policy FILE] [--timeout S] [--memory-mb MIB] [--fuel N]
                               [--log FILE] [--json]
                               [--approve [--deny N[:REASON]]... --out FILE]
                                                                       (_plan.py)
    codemode describe [--tools MODULE:ATTR]... [--mcp CMD]... [--builtin] [--policy FILE]
                      [--mode code|both] [--json]                      (_describe.py)
    codemode eval CORPUS... --policy FILE [--policy FILE...] [--tools MODULE:ATTR]...
                            [--tier T] [--jobs N] [--variants N] [--seed S] [--ray ADDRESS]
                            [--json] [--html FILE]                     (_eval_command.py)
    codemode serve [--tools MODULE:ATTR]... [--mcp CMD]... ...        (_serve.py)
    codemode --version

`codemode run` composes like any filter: the program's stdout and stderr become ours,
unchanged (to a terminal, control characters are shown as escapes); the card (final value
or error, sub-call table, summary) goes to stderr, drawn when stderr is a terminal or
`--table` asks; when it is not drawn, a failed run's reason follows the program's stderr.
`--json` prints one `RunReport` on stdout instead. Exit status: 0 the program completed,
1 it failed or hit a limit, 2 bad usage (options, program file, policy, log, MCP server,
a resumption that cannot be made), 3 the run paused, waiting for approval: stderr lists the
requests and the `codemode resume` command that goes on (docs/codemode.md "Pausing for
approval"); 128 + signum when SIGTERM, SIGHUP or SIGINT stopped a command (cleanly, for
`run`, `resume`, `serve` and `eval`, whether or not SIGINT is ignored: `_stop.py`).
Tables and messages are drawn at the terminal's width, or whole when piped (`_console.py`).
"""

from __future__ import annotations

import gc
import shlex
import sys
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ._cache import cache_app
from ._console import err_console
from ._describe import DESCRIBE_HELP, DESCRIBE_SHORT_HELP, describe_command
from ._eval_command import EVAL_HELP, EVAL_SHORT_HELP, eval_command
from ._help import _Command, _Group
from ._log import log_app
from ._options import (
    FUEL,
    JSON_REPORT,
    LOG,
    MCP,
    MEMORY_MB,
    TABLE,
    TIMEOUT,
    TOOLS,
    check_log,
    limits_of,
    load_own_tools,
    load_policy,
    read_program,
    setup_error,
    usage_error,
)
from ._plan import PLAN_HELP, PLAN_SHORT_HELP, load_approval, plan_command
from ._plan import plan_first as plan_first_on_terminal
from ._serve import SERVE_SHORT_HELP, serve_command
from ._stop import still_running, stopping

# What a command needs is imported when it runs, not here: `codemode --help` loads neither
# the sandbox (wasmtime), nor the pipeline, nor rich's console beyond what typer draws help
# with, and `codemode run` loads only what a run uses (tests/codemode/test_lazy_import.py).
if TYPE_CHECKING:
    from codemode.pipeline import ToolDefinition
    from codemode.sandbox import SandboxLimits

    from .._policy.policy import Policy
    from .._run.plan_approval import PlanApproval
    from ._report import RunReport
    from ._run import OutputSoFar, Ran

app = typer.Typer(cls=_Group, add_completion=False, no_args_is_help=True,
                  help="Run model-written Python in a wasmtime sandbox, with every tool "
                       "call governed by one pipeline.")


# Inside the package (codemode/fixtures links to the top-level folder in a checkout), so
# the path holds in an installed wheel as in an editable install.
DEMO_PROGRAM = Path(__file__).resolve().parents[1] / "fixtures" / "demo_program.py"


def _version(value: bool) -> None:
    if value:
        from .._version import codemode_version

        print(f"codemode {codemode_version()}")
        raise typer.Exit(0)


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                 help="Print the version and exit."),
) -> None:
    """Options of `codemode` itself (the group's help is the Typer's)."""


EXIT_PAUSED = 3
"""Exit status of a run that paused, waiting for approval (`codemode resume` goes on)."""


def _execute(source: str, title: str, *, mcp: list[str], builtin: bool, log: Path | None,
             limits: SandboxLimits, policy: Policy | None, as_json: bool,
             table: bool | None, policy_path: Path | None = None,
             tools: list[str] | None = None,
             definitions: list[ToolDefinition] | None = None,
             type_check: str | None = None, approval: PlanApproval | None = None) -> None:
    from ._run import run_program

    _report_run(lambda so_far: run_program(source, title, mcp=mcp, builtin=builtin, log=log,
                                           limits=limits, policy=policy,
                                           tools=definitions or (), so_far=so_far,
                                           type_check=type_check, approval=approval),
                title, as_json=as_json, table=table,
                resume=_resume_command(log, mcp=mcp, builtin=builtin, policy=policy_path,
                                       tools=tools or []))


def _resume_command(log: Path | None, *, mcp: list[str], builtin: bool,
                    policy: Path | None, tools: list[str]) -> Callable[[RunReport], str | None]:
    """How to resume a paused run of this session: `codemode resume LOG RUN_ID`, the same
    tool options, the first request approved and the others denied (an example to edit);
    None with no log (the run cannot be resumed)."""
    def command(report: RunReport) -> str | None:
        if log is None:
            return None
        argv = ["codemode", "resume", str(log), report.run_id]
        for spec in tools:
            argv += ["--tools", spec]
        for server in mcp:
            argv += ["--mcp", server]
        if builtin:
            argv.append("--builtin")
        if policy is not None:
            argv += ["--policy", str(policy)]
        for index, request in enumerate(report.approvals):
            argv += ["--approve" if index == 0 else "--deny", request.id]
        return shlex.join(argv)
    return command


def _report_run(start: Callable[[OutputSoFar], Awaitable[Ran]], title: str, *,
                as_json: bool, table: bool | None,
                resume: Callable[[RunReport], str | None]) -> None:
    """Run `start`, print its report as `run` and `resume` do, and exit with the status. A
    stop signal cancels the run (`_stop.run`): the session closes its turn and its log,
    what the program wrote so far is printed (on stdout and stderr, not with --json), and
    `KeyboardInterrupt` reaches `_Group`, which exits 128 + signum."""
    import msgspec

    from ._echo import Echo
    from ._quiet import collected, host_prints_to_stderr
    from ._render import draw_card, failure_text, pending_text, write_output
    from ._run import OutputSoFar
    from ._stop import run

    out = sys.stdout
    so_far = OutputSoFar(None if as_json else Echo(out))
    with collected() as warned:   # dependencies' tracebacks: one line each, not on stderr
        try:
            with host_prints_to_stderr():      # a tool's print() is not the program's output
                ran = run(_awaited(start, so_far))
        except KeyboardInterrupt:  # a stop signal: the run has stopped; keep its output
            if not as_json and not so_far.echoed():
                stdout, stderr = so_far.streams()
                write_output(out, stdout)
                write_output(sys.stderr, stderr)
            raise
        except Exception as exc:  # MCP start failures, a log in use: clear, typed, no traceback
            raise setup_error(exc) from None
        finally:
            if not as_json:
                for line in warned:
                    sys.stderr.write(f"codemode: warning: {line}\n")
    report = msgspec.structs.replace(ran.report, warnings=tuple(warned))
    draw = table if table is not None else (not as_json and sys.stderr.isatty())
    if as_json:
        sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(report), indent=2)
                                + b"\n")
        sys.stdout.flush()
    elif not so_far.echoed():     # printed as it was written, or now
        write_output(sys.stdout, report.stdout)
        write_output(sys.stderr, report.stderr)
    if draw:
        draw_card(err_console(), report, title, ran.session)
    if report.type_errors and report.kind != "type_error" and not as_json:   # "warn"
        found = "".join(f"  line {e.line}, column {e.column}: {e.message} [{e.rule}]\n"
                        for e in report.type_errors)
        write_output(sys.stderr, f"codemode: warning: the type check found "
                                 f"{len(report.type_errors)} type error(s); the program ran "
                                 f"anyway (--type-check warn):\n{found}")
    paused = report.kind == "pending"
    if paused and not as_json:
        write_output(sys.stderr, pending_text(report, resume(report)))
    elif not report.ok and not as_json and not draw:
        write_output(sys.stderr, f"codemode: {failure_text(report)}\n")
    raise typer.Exit(0 if report.ok else EXIT_PAUSED if paused else 1)


async def _awaited(start: Callable[[OutputSoFar], Awaitable[Ran]],
                   so_far: OutputSoFar) -> Ran:
    return await start(so_far)


# Help texts: one line per paragraph (rich keeps a docstring's line breaks, then rewraps).
_RUN_HELP = (
    "Run PROGRAM in the sandbox, with your own tools (--tools MODULE:ATTR), the tools of "
    "the given MCP servers, and the built-in toolset with --builtin.\n\n"
    "The program's stdout and stderr go to stdout and stderr unchanged. The card (the final "
    "value or the error, the sub-call table and a summary) goes to stderr when stderr is a "
    "terminal or --table is given. --timeout, --memory-mb and --fuel replace the policy's "
    "limits.\n\n"
    "A tool call a policy rule answers with ask pauses the run: stderr lists the requests "
    "and the codemode resume command that goes on. That needs --log: without it, such a "
    "policy refuses to start (exit 2).\n\n"
    "Exit status: 0 the program completed, 1 it failed or hit a limit, 2 bad usage, 3 "
    "paused: waiting for approval, 128+N stopped by signal N (130 SIGINT, 143 SIGTERM).")
_RESUME_HELP = (
    "Resume a run that paused for approval: give a decision for each request it waits on, "
    "and the program runs again from its start, its earlier tool calls answered from LOG "
    "without running again, the approved calls run and the denied ones raise ToolDenied in "
    "the program.\n\n"
    "Give the same --tools, --mcp, --builtin and --policy options as the run had. The output and "
    "--json are those of codemode run; stdout is the program's whole output. An ID is a "
    "request id (RUN_ID:N) or its number N alone.\n\n"
    "Exit status: 0 the program completed, 1 it failed, 2 bad usage (an unknown run or "
    "request, a run already resumed, a request left undecided, a log in use), 3 paused "
    "again: waiting for approval.")
_DEMO_HELP = (
    "Run a bundled example program on the built-in toolset (no network, no server).\n\n"
    "The program's output goes to stdout; its listing and the card go to stderr.")


@app.command(cls=_Command, help=_RUN_HELP,
             short_help="Run a program in the sandbox, with your tools, those of MCP servers "
                        "or the built-in toolset.")
def run(
    program: Path = typer.Argument(
        ..., metavar="PROGRAM",
        help="The Python program to run (a UTF-8 file), or - to read it from stdin."),
    tools: list[str] = TOOLS,
    mcp: list[str] = MCP,
    builtin: bool = typer.Option(False, "--builtin",
                                 help="Expose the built-in fixture toolset too."),
    policy: Path | None = typer.Option(
        None, "--policy", metavar="FILE",
        help="Apply a policy file (TOML): tier, limits, exposed tools and per-tool rules."),
    timeout: float | None = TIMEOUT,
    memory_mb: int | None = MEMORY_MB,
    fuel: int | None = FUEL,
    type_check: str | None = typer.Option(
        None, "--type-check", metavar="enforce|warn|off",
        help="Check the program against its tools' stubs before it runs: enforce refuses "
             "it on an error, warn runs it and reports the errors, off skips the check "
             "(default enforce, or the policy's)."),
    approval: Path | None = typer.Option(
        None, "--approval", metavar="FILE",
        help="Follow a plan approval (codemode plan PROGRAM --approve --out FILE): the "
             "calls it decided run, or are refused, without asking; one that was changed, "
             "sealed with another key, made for another program, or already used by a run "
             "of the log is refused before anything runs (exit 2). Needs --log: an "
             "approval is used once per log."),
    plan_first: bool = typer.Option(
        False, "--plan-first",
        help="Dry-run the program first, print its plan on stderr and ask once, on the "
             "terminal, whether to approve every call the policy asks about (y/N); then "
             "run it, each approved call once. Refused when stdin is not a terminal."),
    log: Path | None = LOG,
    as_json: bool = JSON_REPORT,
    table: bool | None = TABLE,
) -> None:
    """`codemode run` (its help is `_RUN_HELP`)."""
    from codemode.sandbox import SandboxLimits

    if type_check not in (None, "enforce", "warn", "off"):
        raise typer.BadParameter("--type-check must be enforce, warn or off",
                                 param_hint="'--type-check'")
    loaded = load_policy(policy)
    limits = limits_of(loaded.limits if loaded else SandboxLimits(), timeout, memory_mb, fuel)
    check_log(log)
    own = load_own_tools(tools)
    if approval is not None and log is None:
        raise usage_error("--approval needs --log FILE: a plan approval is used by one run "
                          "per log, and the log is what records that it was used")
    if plan_first and (approval is not None or str(program) == "-"):
        raise usage_error("--plan-first asks on stdin: it goes with neither --approval nor "
                          "a program read from stdin (-)")
    source, title = read_program(program)
    approved = (load_approval(approval, source) if approval is not None else
                plan_first_on_terminal(source, mcp=mcp, builtin=builtin, policy=loaded,
                                       own=own, limits=limits, log=log) if plan_first
                else None)
    _execute(source, title, mcp=mcp, builtin=builtin, log=log, limits=limits, policy=loaded,
             as_json=as_json, table=table, policy_path=policy, tools=tools, definitions=own,
             type_check=type_check, approval=approved)

@app.command(cls=_Command, help=_RESUME_HELP,
             short_help="Resume a run that paused for approval, with a decision for each "
                        "request.")
def resume(
    log: Path = typer.Argument(..., metavar="LOG",
                               help="The session log the run paused in (.db or .jsonl)."),
    run_id: str = typer.Argument(..., metavar="RUN_ID",
                                 help="The paused run's id (run_id in its report)."),
    approve: list[str] = typer.Option(
        [], "--approve", metavar="ID", help="Approve this request; repeatable."),
    deny: list[str] = typer.Option(
        [], "--deny", metavar="ID[:REASON]",
        help="Deny this request, with the reason the program's ToolDenied carries; "
             "repeatable."),
    approve_all: bool = typer.Option(False, "--approve-all",
                                     help="Approve every request not named otherwise."),
    deny_all: bool = typer.Option(False, "--deny-all",
                                  help="Deny every request not named otherwise."),
    tools: list[str] = typer.Option(
        [], "--tools", metavar="MODULE:ATTR",
        help="Expose your own tools (ATTR of MODULE: a tool, a list of tools or a function "
             "returning them), as the run did; repeatable."),
    mcp: list[str] = typer.Option(
        [], "--mcp", metavar="CMD",
        help="Start an MCP server over stdio and expose its tools, as the run did; "
             "repeatable."),
    builtin: bool = typer.Option(False, "--builtin",
                                 help="Expose the built-in fixture toolset too, as the run did."),
    policy: Path | None = typer.Option(
        None, "--policy", metavar="FILE",
        help="Apply this policy file (TOML), as the run did: its rules decide the resumed "
             "program's new calls (its limits are the paused run's)."),
    as_json: bool = JSON_REPORT,
    table: bool | None = TABLE,
) -> None:
    """`codemode resume` (its help is `_RESUME_HELP`)."""
    if approve_all and deny_all:
        raise usage_error("--approve-all and --deny-all exclude each other")
    check_log(log, param="'LOG'")
    if not log.exists():
        raise typer.BadParameter(f"file {str(log)!r} does not exist.", param_hint="'LOG'")
    from ._run import Decisions, resume_program

    loaded = load_policy(policy)
    own = load_own_tools(tools)
    decisions = Decisions(approve=tuple(approve), deny=tuple(deny), approve_all=approve_all,
                          deny_all=deny_all)
    _report_run(lambda so_far: resume_program(run_id, decisions, mcp=mcp, builtin=builtin,
                                              log=log, policy=loaded, tools=own,
                                              so_far=so_far),
                f"resume {run_id}", as_json=as_json, table=table,
                resume=_resume_command(log, mcp=mcp, builtin=builtin, policy=policy,
                                       tools=tools))


@app.command(cls=_Command, help=_DEMO_HELP,
             short_help="Run a bundled example program on the built-in toolset (no network, "
                        "no server).")
def demo(
    log: Path | None = LOG,
) -> None:
    """`codemode demo` (its help is `_DEMO_HELP`)."""
    from rich.markup import escape
    from rich.panel import Panel

    from codemode.sandbox import SandboxLimits

    check_log(log)
    source = DEMO_PROGRAM.read_text(encoding="utf-8")
    err_console().print(Panel(escape(source.rstrip()), title="program", title_align="left",
                              border_style="dim", expand=err_console().is_terminal))
    _execute(source, "demo", mcp=[], builtin=True, log=log, limits=SandboxLimits(),
             policy=None, as_json=False, table=True)


def main() -> None:
    warnings.showwarning = _show_warning
    status: Any = 0
    try:
        with stopping():
            if sys.stderr.isatty():
                app()
            else:
                sys.exit(_plain_errors())
    except SystemExit as exc:
        status = exc.code
        raise
    finally:
        _skip_exit_collections()
        if still_running():
            _leave_tools_behind(status)


def _leave_tools_behind(status: Any) -> None:
    """End the process now, with `status` (`SystemExit.code`), when a synchronous tool is
    still running in a thread after the command is over (its run ended at its limit; a
    thread cannot be stopped, and the interpreter's exit would wait for it). The exit
    functions (`atexit`) still run; the stuck threads do not delay the exit."""
    import atexit
    import os

    print(f"codemode: {still_running()} tool call(s) still running in a thread were left "
          "behind (a synchronous tool that did not return when its run ended)",
          file=sys.stderr, flush=True)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if status is None:
        os._exit(0)
    if not isinstance(status, int):      # a message, as SystemExit("...") prints it
        print(status, file=sys.stderr, flush=True)
        os._exit(1)
    os._exit(status)


def _skip_exit_collections() -> None:
    """The command is over (its session and log closed, its output written): flush the
    output, then freeze every object the process holds so the interpreter's exit does not
    walk them in its garbage collections (tens of milliseconds over wasmtime's ctypes
    objects). This process is the CLI's own; the library never does this. atexit handlers
    (the worker pool's close) still run."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # closed or broken: the exit reports it as before
            pass
    gc.freeze()


def _plain_errors() -> int:
    """`app()`, with a usage error printed as click prints it (`Error: ...` on one line)
    rather than in a panel rich draws at some width: stderr is a pipe or a file here, read
    by a program or a log, where a message broken mid-sentence is harder to match."""
    try:
        status = app(standalone_mode=False)
    except typer.Abort:
        sys.stderr.write("Aborted!\n")
        return 1
    except typer.TyperException as exc:   # click's ClickException family (typer vendors it)
        show = getattr(exc, "show", None)
        if show is None:
            raise
        show()
        return int(getattr(exc, "exit_code", 2))
    return status if isinstance(status, int) else 0


_python_showwarning = warnings.showwarning


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """A policy's warning as one plain line on stderr; others as Python shows them."""
    policies = sys.modules.get("codemode._policy.policy")   # not loaded: no policy could warn
    if policies is not None and issubclass(category, policies.PolicyWarning):
        sys.stderr.write(f"codemode: warning: {message}\n")
        return
    _python_showwarning(message, category, filename, lineno, file, line)


app.command("describe", cls=_Command, help=DESCRIBE_HELP,
            short_help=DESCRIBE_SHORT_HELP)(describe_command)
app.command("eval", cls=_Command, help=EVAL_HELP, short_help=EVAL_SHORT_HELP)(eval_command)
app.command("plan", cls=_Command, help=PLAN_HELP, short_help=PLAN_SHORT_HELP)(plan_command)
app.command("serve", cls=_Command, short_help=SERVE_SHORT_HELP)(serve_command)
app.add_typer(log_app, name="log")     # `codemode log check|show FILE` (_log.py)
app.add_typer(cache_app, name="cache")   # `codemode cache list|prune` (_cache.py)
