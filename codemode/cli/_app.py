"""The `codemode` command line: `run`, `resume`, `demo`, `eval`, `serve` and `log`.

    codemode run PROGRAM.py|- [--mcp CMD]... [--builtin] [--policy FILE] [--timeout S]
                              [--memory-mb MIB] [--fuel N] [--log FILE] [--json]
                              [--table/--no-table]
    codemode resume LOG RUN_ID [--approve ID]... [--deny ID[:REASON]]... [--approve-all]
                               [--deny-all] [--mcp CMD]... [--builtin] [--policy FILE]
                               [--json] [--table/--no-table]
    codemode demo [--log FILE]
    codemode eval CORPUS... --policy FILE [--policy FILE...] [--tier T] [--jobs N]
                            [--variants N] [--seed S] [--ray ADDRESS] [--json] [--html FILE]
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
`run`, `resume`, `serve` and `eval`: `_stop.py`).
"""

from __future__ import annotations

import functools
import gc
import shlex
import sys
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import typer

from ._cache import cache_app
from ._help import _Command, _Group
from ._log import log_app
from ._stop import Stopped, report_stop, stopping

# What a command needs is imported when it runs, not here: `codemode --help` loads neither
# the sandbox (wasmtime), nor the pipeline, nor rich's console beyond what typer draws help
# with, and `codemode run` loads only what a run uses (tests/codemode/test_lazy_import.py).
if TYPE_CHECKING:
    from rich.console import Console

    from codemode.sandbox import SandboxLimits

    from .._policy.policy import Policy
    from ._report import RunReport
    from ._run import Ran

app = typer.Typer(cls=_Group, add_completion=False, no_args_is_help=True,
                  help="Run model-written Python in a wasmtime sandbox, with every tool "
                       "call governed by one pipeline.")


@functools.cache
def _err_console() -> Console:
    """The console of the card and of error messages: stderr (made on first use)."""
    from rich.console import Console

    return Console(stderr=True)


def _print_error(label: str, text: str, **options: Any) -> None:
    """`label: text` on stderr, the label in red, `text` shown as it is (no rich markup);
    `options` go to `Console.print`."""
    from rich.markup import escape

    _err_console().print(f"[red]{label}:[/red] {escape(text)}", **options)


# Inside the package (codemode/fixtures links to the top-level folder in a checkout), so
# the path holds in an installed wheel as in an editable install.
DEMO_PROGRAM = Path(__file__).resolve().parents[1] / "fixtures" / "demo_program.py"

_OPTION_OF = {"wall_clock_s": "--timeout", "memory_bytes": "--memory-mb", "fuel": "--fuel"}
_BOUNDS = {"--timeout": "more than 0 and at most 86400 seconds (a day)",
           "--memory-mb": "between 16 and 4096 MiB", "--fuel": "a positive number"}


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


_JSON_REPORT = typer.Option(
    False, "--json",
    help="Print a JSON report on stdout (with the program's output) and nothing else.")
_TABLE = typer.Option(
    None, "--table/--no-table",
    help="Draw the card and sub-call table on stderr (default: when it is a terminal).")
_LOG = typer.Option(
    None, "--log", metavar="FILE",
    help="Append the session's events to this file (.db or .jsonl) in an existing directory.")


def _check_log_directory(log: Path | None) -> None:
    """Raises:
        typer.BadParameter: `--log` names a file in a directory that does not exist."""
    if log is not None and not log.parent.is_dir():
        raise typer.BadParameter(f"directory {str(log.parent)!r} does not exist.",
                                 param_hint="'--log'")


def _load_policy(policy: Path | None) -> Policy | None:
    """The policy file loaded, or None without one.

    Raises:
        typer.Exit: 2, after printing why the file is not a valid policy."""
    if policy is None:
        return None
    from .._policy.policy import Policy, PolicyError

    try:
        return Policy.load(policy)
    except PolicyError as exc:
        _print_error("invalid policy", str(exc), highlight=False)
        raise typer.Exit(2) from None


def _usage_error(message: str) -> typer.Exit:
    _print_error("error", message, highlight=False, soft_wrap=True)
    return typer.Exit(2)


def _limits(base: SandboxLimits, timeout: float | None, memory_mb: int | None,
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


def _read_program(program: Path) -> tuple[str, str]:
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
        raise _usage_error(f"{where} is larger than {MAX_CODE_BYTES >> 20} MiB, the most a "
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
        raise _usage_error(f"{where} is not valid UTF-8 (byte {exc.start}); save the program "
                           "as UTF-8") from None


EXIT_PAUSED = 3
"""Exit status of a run that paused, waiting for approval (`codemode resume` goes on)."""


def _execute(source: str, title: str, *, mcp: list[str], builtin: bool, log: Path | None,
             limits: SandboxLimits, policy: Policy | None, as_json: bool,
             table: bool | None, policy_path: Path | None = None) -> None:
    from ._run import run_program

    _report_run(lambda: run_program(source, title, mcp=mcp, builtin=builtin, log=log,
                                    limits=limits, policy=policy),
                title, as_json=as_json, table=table,
                resume=_resume_command(log, mcp=mcp, builtin=builtin, policy=policy_path))


def _resume_command(log: Path | None, *, mcp: list[str], builtin: bool,
                    policy: Path | None) -> Callable[[RunReport], str | None]:
    """How to resume a paused run of this session: `codemode resume LOG RUN_ID`, the same
    tool options, the first request approved and the others denied (an example to edit);
    None with no log (the run cannot be resumed)."""
    def command(report: RunReport) -> str | None:
        if log is None:
            return None
        argv = ["codemode", "resume", str(log), report.run_id]
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


def _report_run(start: Callable[[], Awaitable[Ran]], title: str, *, as_json: bool,
                table: bool | None, resume: Callable[[RunReport], str | None]) -> None:
    """Run `start`, print its report as `run` and `resume` do, and exit with the status."""
    import asyncio

    import msgspec

    from ._quiet import collected
    from ._render import draw_card, failure_text, pending_text, write_output

    with collected() as warned:   # dependencies' tracebacks: one line each, not on stderr
        try:
            ran = asyncio.run(_awaited(start))
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: the session has closed its turn
            raise _stopped_exit() from None
        except Exception as exc:  # MCP start failures, a log in use: clear, typed, no traceback
            raise _usage_error(f"{type(exc).__name__}: {exc}") from None
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
    else:
        write_output(sys.stdout, report.stdout)
        write_output(sys.stderr, report.stderr)
    if draw:
        draw_card(_err_console(), report, title, ran.session)
    paused = report.kind == "pending"
    if paused and not as_json:
        write_output(sys.stderr, pending_text(report, resume(report)))
    elif not report.ok and not as_json and not draw:
        write_output(sys.stderr, f"codemode: {failure_text(report)}\n")
    raise typer.Exit(0 if report.ok else EXIT_PAUSED if paused else 1)


async def _awaited(start: Callable[[], Awaitable[Ran]]) -> Ran:
    return await start()


# Help texts: one line per paragraph (rich keeps a docstring's line breaks, then rewraps).
_RUN_HELP = (
    "Run PROGRAM in the sandbox, with the tools of the given MCP servers (and of the "
    "built-in toolset with --builtin).\n\n"
    "The program's stdout and stderr go to stdout and stderr unchanged. The card (the final "
    "value or the error, the sub-call table and a summary) goes to stderr when stderr is a "
    "terminal or --table is given. --timeout, --memory-mb and --fuel replace the policy's "
    "limits.\n\n"
    "A tool call a policy rule answers with ask pauses the run: stderr lists the requests "
    "and the codemode resume command that goes on. That needs --log: without it, such a "
    "policy refuses to start (exit 2).\n\n"
    "Exit status: 0 the program completed, 1 it failed or hit a limit, 2 bad usage, 3 "
    "paused: waiting for approval.")
_RESUME_HELP = (
    "Resume a run that paused for approval: give a decision for each request it waits on, "
    "and the program runs again from its start, its earlier tool calls answered from LOG "
    "without running again, the approved calls run and the denied ones raise ToolDenied in "
    "the program.\n\n"
    "Give the same --mcp, --builtin and --policy options as the run had. The output and "
    "--json are those of codemode run; stdout is the program's whole output. An ID is a "
    "request id (RUN_ID:N) or its number N alone.\n\n"
    "Exit status: 0 the program completed, 1 it failed, 2 bad usage (an unknown run or "
    "request, a run already resumed, a request left undecided, a log in use), 3 paused "
    "again: waiting for approval.")
_DEMO_HELP = (
    "Run a bundled example program on the built-in toolset (no network, no server).\n\n"
    "The program's output goes to stdout; its listing and the card go to stderr.")
_EVAL_HELP = (
    "Run every program of a corpus under a policy and report, per case and category, what "
    "happened (blocked, limit, escaped, host-affected, ran-ok, wrong-output). With several "
    "--policy options, run the corpus under each and compare them.\n\n"
    "Exits 1 when a case escaped or affected the host under any policy.")


@app.command(cls=_Command, help=_RUN_HELP,
             short_help="Run a program in the sandbox, with the tools of MCP servers or the "
                        "built-in toolset.")
def run(
    program: Path = typer.Argument(
        ..., metavar="PROGRAM",
        help="The Python program to run (a UTF-8 file), or - to read it from stdin."),
    mcp: list[str] = typer.Option(
        [], "--mcp", metavar="CMD",
        help='Start an MCP server over stdio and expose its tools, e.g. '
             '--mcp "mcp-server-time"; repeatable.'),
    builtin: bool = typer.Option(False, "--builtin",
                                 help="Expose the built-in fixture toolset too."),
    policy: Path | None = typer.Option(
        None, "--policy", metavar="FILE",
        help="Apply a policy file (TOML): tier, limits, exposed tools and per-tool rules."),
    timeout: float | None = typer.Option(
        None, "--timeout", metavar="SECONDS",
        help="Wall-clock limit of the run in seconds (default 10, or the policy's)."),
    memory_mb: int | None = typer.Option(
        None, "--memory-mb", metavar="MIB",
        help="Memory limit of the run in MiB (default 256, or the policy's)."),
    fuel: int | None = typer.Option(
        None, "--fuel", metavar="N",
        help="Fuel budget of the run in wasm fuel units (default none, or the policy's)."),
    log: Path | None = _LOG,
    as_json: bool = _JSON_REPORT,
    table: bool | None = _TABLE,
) -> None:
    """`codemode run` (its help is `_RUN_HELP`)."""
    from codemode.sandbox import SandboxLimits

    loaded = _load_policy(policy)
    limits = _limits(loaded.limits if loaded else SandboxLimits(), timeout, memory_mb, fuel)
    _check_log_directory(log)
    source, title = _read_program(program)
    _execute(source, title, mcp=mcp, builtin=builtin, log=log, limits=limits, policy=loaded,
             as_json=as_json, table=table, policy_path=policy)




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
    as_json: bool = _JSON_REPORT,
    table: bool | None = _TABLE,
) -> None:
    """`codemode resume` (its help is `_RESUME_HELP`)."""
    if approve_all and deny_all:
        raise _usage_error("--approve-all and --deny-all exclude each other")
    if not log.is_file():
        raise typer.BadParameter(f"file {str(log)!r} does not exist.", param_hint="'LOG'")
    from ._run import Decisions, resume_program

    loaded = _load_policy(policy)
    decisions = Decisions(approve=tuple(approve), deny=tuple(deny), approve_all=approve_all,
                          deny_all=deny_all)
    _report_run(lambda: resume_program(run_id, decisions, mcp=mcp, builtin=builtin, log=log,
                                       policy=loaded),
                f"resume {run_id}", as_json=as_json, table=table,
                resume=_resume_command(log, mcp=mcp, builtin=builtin, policy=policy))


@app.command(cls=_Command, help=_DEMO_HELP,
             short_help="Run a bundled example program on the built-in toolset (no network, "
                        "no server).")
def demo(
    log: Path | None = _LOG,
) -> None:
    """`codemode demo` (its help is `_DEMO_HELP`)."""
    from rich.markup import escape
    from rich.panel import Panel

    from codemode.sandbox import SandboxLimits

    _check_log_directory(log)
    source = DEMO_PROGRAM.read_text(encoding="utf-8")
    _err_console().print(Panel(escape(source.rstrip()), title="program", title_align="left",
                               border_style="dim"))
    _execute(source, "demo", mcp=[], builtin=True, log=log, limits=SandboxLimits(),
             policy=None, as_json=False, table=True)


@app.command("eval", cls=_Command, help=_EVAL_HELP,
             short_help="Run a corpus of programs under a policy and report what each did.")
def eval_corpus(
    corpus: list[Path] = typer.Argument(
        ..., metavar="CORPUS",
        help="Corpus files or directories; every *.py under a directory is a case."),
    policy: list[Path] = typer.Option(
        ..., "--policy", metavar="FILE",
        help="Run the cases under this policy file (TOML); repeat it to compare policies."),
    tier: str | None = typer.Option(
        None, "--tier", metavar="TIER",
        help="Run in this tier instead of the policy's: wasm, restricted or "
             "restricted-in-process."),
    jobs: int = typer.Option(1, "--jobs", min=1, metavar="N",
                             help="Run this many cases at once, in worker processes."),
    ray: str | None = typer.Option(
        None, "--ray", metavar="ADDRESS",
        help="Run the cases on a Ray cluster instead, as --jobs actors (needs the ray "
             "extra). ADDRESS: local (start one here), auto (join the one ray start runs "
             "here) or ray://HOST:PORT."),
    variants: int = typer.Option(
        0, "--variants", min=0, metavar="N",
        help="Also run up to N generated variants of each case (technique-preserving "
             "rewrites); an escaped variant is written to eval-escapes/."),
    seed: int = typer.Option(0, "--seed", metavar="S",
                             help="Seed of the variant generator (same seed, same variants)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    html: Path | None = typer.Option(None, "--html", metavar="FILE",
                                        help="Also write a self-contained HTML report."),
) -> None:
    """`codemode eval` (its help is `_EVAL_HELP`)."""
    from rich.console import Console

    from .._eval import run_command
    try:
        status = run_command(corpus, policy, tier=tier, jobs=jobs, as_json=as_json,
                             html_path=html, console=Console(), err_console=_err_console(),
                             ray_address=ray, variants=variants, seed=seed)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: every worker has been stopped
        raise _stopped_exit() from None
    raise typer.Exit(status)


def main() -> None:
    global _STOPPED
    warnings.showwarning = _show_warning
    try:
        with stopping() as _STOPPED:
            if sys.stderr.isatty():
                app()
            else:
                sys.exit(_plain_errors())
    finally:
        _skip_exit_collections()


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
    rather than in a panel rich wraps at 80 columns: stderr is a pipe or a file here, read by
    a program or a log, where a message broken mid-sentence is harder to match."""
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


# Which signal stopped the command, under `main` (SIGTERM and SIGHUP stop like Ctrl-C).
_STOPPED = Stopped()


def _stopped_exit() -> typer.Exit:
    """The command was interrupted (and has unwound): exit 128 + the signal's number."""
    return typer.Exit(report_stop(_STOPPED))


_python_showwarning = warnings.showwarning


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """A policy's warning as one plain line on stderr; others as Python shows them."""
    policies = sys.modules.get("codemode._policy.policy")   # not loaded: no policy could warn
    if policies is not None and issubclass(category, policies.PolicyWarning):
        sys.stderr.write(f"codemode: warning: {message}\n")
        return
    _python_showwarning(message, category, filename, lineno, file, line)


@app.command("serve", cls=_Command,
             short_help="Serve run_code (the upstream MCP servers' tools, composed by a "
                        "sandboxed program) as an MCP server.")
def serve_command(
    mcp: list[str] = typer.Option([], "--mcp", metavar="CMD",
                                  help='An upstream MCP server over stdio, e.g. --mcp '
                                       '"python -m mcp_server_time". Repeatable.'),
    mcp_url: list[str] = typer.Option([], "--mcp-url", metavar="URL",
                                      help="An upstream MCP server over streamable HTTP, e.g. "
                                           "http://127.0.0.1:8001/mcp. Repeatable."),
    builtin: bool = typer.Option(False, "--builtin",
                                 help="Also expose the built-in demo toolset."),
    policy: Path | None = typer.Option(None, "--policy", metavar="FILE",
                                        help="A policy file (TOML): tier, limits, exposed "
                                               "tools and per-tool rules (ask = elicitation)."),
    log: Path | None = typer.Option(None, "--log", metavar="FILE",
                                    help="Session log file (.db or .jsonl)."),
    mode: str = typer.Option("code", "--mode", metavar="code|both",
                             help="code: list only run_code; both: the upstream tools too."),
    transport: str = typer.Option("stdio", "--transport", metavar="stdio|http",
                                  help="How clients connect."),
    host: str = typer.Option("127.0.0.1", "--host", metavar="ADDRESS",
                             help="Address to bind (http)."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, metavar="PORT",
                             help="TCP port (http); 0 picks a free one."),
    mcp_timeout: float = typer.Option(60.0, "--mcp-timeout", min=0.001, metavar="SECONDS",
                                      help="Seconds each upstream tool call may take."),
    approvals: str = typer.Option(
        "elicit", "--approvals", metavar="elicit|auto|defer",
        help="How a program's call that needs approval is decided. elicit: ask the client "
             "(a client that cannot be asked gets a denial); auto: ask it when it can, else "
             "pause the run; defer: always pause the run. A paused run is resumed with the "
             "resume_run tool, which approves: keep it away from the model."),
) -> None:
    """Serve run_code (the tools of the upstream MCP servers, composed by a sandboxed
    program) as an MCP server. Every call goes through one pipeline and one log."""
    from .._mcp.serve import serve

    if mode not in ("code", "both"):
        raise typer.BadParameter("--mode must be code or both")
    if transport not in ("stdio", "http"):
        raise typer.BadParameter("--transport must be stdio or http")
    if approvals not in ("elicit", "auto", "defer"):
        raise typer.BadParameter("--approvals must be elicit, auto or defer")
    _check_log_directory(log)
    loaded = _load_policy(policy)
    try:
        serve(transport="http" if transport == "http" else "stdio", host=host, port=port,
              mcp=mcp, mcp_urls=mcp_url, builtin=builtin, policy=loaded, log=log, mode=mode,
              call_timeout_s=mcp_timeout, approvals=approvals)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: the session and its log are closed
        raise _stopped_exit() from None
    except Exception as exc:   # an upstream that did not start, a port in use, ...
        _print_error("error", f"{type(exc).__name__}: {exc}")
        raise typer.Exit(2) from None


app.add_typer(log_app, name="log")     # `codemode log check|show FILE` (_log.py)
app.add_typer(cache_app, name="cache")   # `codemode cache list|prune` (_cache.py)
