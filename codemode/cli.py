"""The `codemode` command line: `run`, `demo` and `eval`.

    codemode run PROGRAM.py [--mcp "CMD ARGS"]... [--log FILE] [--builtin] [--timeout S]
                            [--policy FILE]
    codemode demo
    codemode eval CORPUS... --policy FILE [--tier wasm|restricted] [--jobs N] [--json]
                            [--html FILE]
"""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from codemode.pipeline import CallResult, Session, events
from codemode.sandbox import SandboxLimits, SandboxUnavailable

from ._log_cli import log_app
from ._policy import Policy, PolicyError
from ._run_code import CodeMode

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Run model-written Python in a wasmtime sandbox, with every tool "
                       "call governed by one pipeline.")
app.add_typer(log_app, name="log")        # `codemode log check FILE` (_log_cli.py)
console = Console()
err_console = Console(stderr=True)

DEMO_PROGRAM = Path(__file__).resolve().parent.parent / "fixtures" / "demo_program.py"


_OPTION_OF = {"wall_clock_s": "--timeout", "memory_bytes": "--memory-mb", "fuel": "--fuel"}
# What a user may see on the screen: newlines and tabs, not terminal control sequences
# (C0, DEL, C1), bidirectional overrides, invisible or line-breaking format characters.
_CONTROL = {c: f"\\u{c:04x}" if c > 0xff else f"\\x{c:02x}"
            for c in (*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0),
                      *range(0x200b, 0x2010), *range(0x2028, 0x202f), *range(0x2066, 0x206a),
                      0xfeff)}
_SHOWN_CHARS = 20_000
_SHOWN_LINES = 400


def _limits(timeout: float, memory_mb: int, fuel: Optional[int]) -> SandboxLimits:
    import msgspec
    try:
        return msgspec.convert({"wall_clock_s": timeout, "memory_bytes": memory_mb << 20,
                                "fuel": fuel}, SandboxLimits)
    except msgspec.ValidationError as exc:
        field = str(exc).rsplit("$.", 1)[-1].rstrip("`")
        if field in _OPTION_OF:
            bounds = {"--timeout": "between 0 and 86400 seconds",
                      "--memory-mb": "between 16 and 4096 MiB",
                      "--fuel": "a positive number"}[_OPTION_OF[field]]
            raise typer.BadParameter(f"{_OPTION_OF[field]} must be {bounds}") from None
        raise typer.BadParameter(str(exc)) from None


def _shown(text: str) -> str:
    """Text safe and small enough for the terminal: control and invisible characters made
    visible, cut after `_SHOWN_CHARS` characters or `_SHOWN_LINES` lines (the log and
    --json keep everything)."""
    if len(text) > _SHOWN_CHARS:
        text = text[:_SHOWN_CHARS] + f"\n[... {len(text) - _SHOWN_CHARS} more characters]"
    lines = text.split("\n")
    if len(lines) > _SHOWN_LINES:
        text = "\n".join(lines[:_SHOWN_LINES]) + \
            f"\n[... {len(lines) - _SHOWN_LINES} more lines]"
    return escape(text.translate(_CONTROL))


def _read_program(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(path))} is not valid UTF-8 "
                          f"(byte {exc.start}); save the program as UTF-8")
        raise typer.Exit(2) from None


async def _run_program(source: str, title: str, *, mcp: list[str], builtin: bool,
                       log: Optional[Path], limits: SandboxLimits,
                       policy: Optional[Policy] = None) -> tuple[CallResult, list, Session]:
    async with AsyncExitStack() as stack:
        tools = []
        if builtin:
            from codemode.fixtures.toolset import builtin_tools
            tools.extend(builtin_tools())
        if mcp:
            from ._mcp import connect_servers
            servers = await stack.enter_async_context(connect_servers(mcp))
            for server in servers:
                tools.extend(server.definitions)
        session = Session(tools=tools, log=str(log) if log else None)
        stack.callback(session.log.close)
        if policy is not None:
            policy.apply(session)
        else:
            CodeMode(session, limits=limits)
        result = await session.call("run_code", {"code": source, "description": title})
        return result, list(session.log.read()), session


def _card_text(payload: Any) -> str | None:
    """Text of a presenter's card payload: a string, or a mapping's title/summary."""
    if isinstance(payload, str):
        return payload
    if isinstance(payload, dict):
        parts = [str(payload[k]) for k in ("title", "summary", "text") if payload.get(k)]
        return " — ".join(parts) or None
    return None


def _render(result: CallResult, log_events: list, session: Session) -> None:
    """The top-level card for the run_code call (its presenter gives the title), with its
    sub-calls as rows nested under it, each rendered by its tool's presenters when it has
    them (PIPELINE.md §11.8), else generically."""
    call = [e for e in log_events if isinstance(e, events.ToolCall)][-1]   # this run's
    arguments = json.loads(call.arguments)
    card = session.present_call(call.name, arguments) or {}
    title = card.get("title", call.name) if isinstance(card, dict) else call.name
    style = "red" if result.is_error else "green"
    console.print(Panel(_shown(result.text) or "(no output)", title=f"run_code: {_shown(title)}",
                        border_style=style, title_align="left"))
    ours = [e for e in log_events if getattr(e, "root_call_id", None) == call.call_id]
    starts = {e.sub_call_id: e for e in ours if isinstance(e, events.CodeDispatchStart)}
    rows = [e for e in ours if isinstance(e, events.CodeDispatch)]
    if rows:
        table = Table(title="sub-calls", title_justify="left", show_lines=False)
        table.add_column("#", justify="right")
        table.add_column("tool")
        table.add_column("arguments", overflow="fold")
        table.add_column("outcome", overflow="fold")
        table.add_column("ms", justify="right")
        for event in rows:
            start = starts.get(event.sub_call_id)
            ms = f"{(event.time - start.time) * 1000:.0f}" if start else ""
            projection = {"content": list(event.content), "isError": event.is_error,
                          "meta": None}
            text = _card_text(session.present_result(event.name, event.arguments, projection))
            if text is None:
                text = " ".join(" ".join(b.get("text", "").split())
                                for b in event.content if isinstance(b, dict))
            text = text[:80] + ("…" if len(text) > 80 else "")
            outcome = f"[red]{event.code or 'error'}: {_shown(text)}[/red]" if event.is_error else _shown(text)
            shown = _card_text(session.present_call(event.name, event.arguments))
            table.add_row(event.sub_call_id.rsplit(":", 1)[-1], event.name,
                          _shown(shown or json.dumps(event.arguments, ensure_ascii=False)[:80]),
                          outcome, ms)
        console.print(table)
    failed = sum(1 for e in rows if e.is_error)
    console.print(f"[dim]{len(rows)} sub-call(s), {failed} failed[/dim]")


def _execute(source: str, title: str, *, mcp: list[str], builtin: bool, log: Optional[Path],
             limits: SandboxLimits, as_json: bool, policy: Optional[Policy] = None) -> None:
    try:
        result, log_events, session = asyncio.run(_run_program(
            source, title, mcp=mcp, builtin=builtin, log=log, limits=limits, policy=policy))
    except SandboxUnavailable as exc:
        err_console.print(f"[red]sandbox unavailable:[/red] {exc}")
        raise typer.Exit(3) from None
    except Exception as exc:  # MCP start failures and the like: clear, typed, no traceback
        err_console.print(f"[red]error:[/red] {type(exc).__name__}: {exc}")
        raise typer.Exit(2) from None
    if as_json:
        value = None if result.is_error else result.value
        print(json.dumps({"is_error": result.is_error, "text": result.text, "value": value},
                         ensure_ascii=False, indent=2))
    else:
        _render(result, log_events, session)
    raise typer.Exit(1 if result.is_error else 0)


@app.command()
def run(
    program: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True,
                                   help="The Python program to run in the sandbox."),
    mcp: list[str] = typer.Option([], "--mcp", metavar="CMD",
                                  help='Start an MCP server over stdio, e.g. '
                                       '--mcp "mcp-server-time". Repeatable.'),
    builtin: bool = typer.Option(False, "--builtin",
                                 help="Also expose the built-in fixture toolset."),
    log: Optional[Path] = typer.Option(None, "--log", help="Session log file (.db or .jsonl)."),
    timeout: float = typer.Option(10.0, "--timeout", help="Wall-clock limit, seconds."),
    memory_mb: int = typer.Option(256, "--memory-mb", help="Memory limit, MiB."),
    fuel: Optional[int] = typer.Option(None, "--fuel", help="Fuel budget (off by default)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    policy: Optional[Path] = typer.Option(
        None, "--policy", metavar="FILE",
        help="A policy file (TOML): tier, limits, exposed tools and per-tool rules. Its "
             "limits replace --timeout, --memory-mb and --fuel."),
) -> None:
    """Run PROGRAM in the sandbox with the tools of the given MCP servers; print its
    output, final value and a sub-call summary."""
    loaded = None
    if policy is not None:
        try:
            loaded = Policy.load(policy)
        except PolicyError as exc:
            err_console.print(f"[red]invalid policy:[/red] {escape(str(exc))}")
            raise typer.Exit(2) from None
    _execute(_read_program(program), program.name, mcp=mcp, builtin=builtin,
             log=log, limits=_limits(timeout, memory_mb, fuel), as_json=as_json,
             policy=loaded)


@app.command()
def demo(
    log: Optional[Path] = typer.Option(None, "--log", help="Session log file (.db or .jsonl)."),
) -> None:
    """Run a bundled example program on the built-in toolset (no network, no server)."""
    source = DEMO_PROGRAM.read_text(encoding="utf-8")
    console.print(Panel(source.rstrip(), title="program", title_align="left", border_style="dim"))
    _execute(source, "demo", mcp=[], builtin=True, log=log,
             limits=SandboxLimits(), as_json=False)


@app.command("eval")
def eval_corpus(
    corpus: list[Path] = typer.Argument(..., help="Corpus files or directories (every *.py "
                                                  "under them, recursively)."),
    policy: Path = typer.Option(..., "--policy", metavar="FILE", help="The policy file (TOML)."),
    tier: Optional[str] = typer.Option(None, "--tier", metavar="wasm|restricted",
                                       help="Run in this tier instead of the policy's."),
    jobs: int = typer.Option(1, "--jobs", min=1, help="Worker processes running cases at once."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    html: Optional[Path] = typer.Option(None, "--html", metavar="FILE",
                                        help="Also write a self-contained HTML report."),
) -> None:
    """Run every program of a corpus under a policy and report, per case and category,
    what happened (blocked, limit, escaped, host-affected, ran-ok, wrong-output). Exits 1
    when a case escaped or affected the host."""
    from ._eval import run_command
    raise typer.Exit(run_command(corpus, policy, tier=tier, jobs=jobs, as_json=as_json,
                                 html_path=html, console=console, err_console=err_console))


def main() -> None:
    app()
