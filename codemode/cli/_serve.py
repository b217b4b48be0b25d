"""`codemode serve`: run_code (and, with `--mode both`, the tools themselves) as an MCP
server over stdio or streamable HTTP (`codemode._mcp.serve`, docs/integrations.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from ._console import print_error
from ._options import (
    EXIT_USAGE,
    TOOLS,
    check_log,
    load_own_tools,
    load_policy,
    setup_error,
)

SERVE_SHORT_HELP = ("Serve run_code (your tools and the upstream MCP servers' tools, composed "
                    "by a sandboxed program) as an MCP server.")


def serve_command(
    tools: list[str] = TOOLS,
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
                             help="code: list only run_code; both: the other tools too."),
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
             "resume_run tool, which decides only with the approval token."),
    approve_plans: bool = typer.Option(
        False, "--approve-plans",
        help="Dry-run each program first and ask the client once, in one elicitation, about "
             "every call its plan needs approval for (approve all, or deny some or all by "
             "entry number); then run it, each approved call once. A client that cannot be "
             "asked gets what --approvals says."),
    approval_token_file: Path | None = typer.Option(
        None, "--approval-token-file", metavar="FILE",
        help="A file holding the secret (32+ characters) that resume_run requests must send "
             "in their _meta, under the key codemode/approvalToken, to approve or deny; "
             "default: the CODEMODE_APPROVAL_TOKEN environment variable. Without one, "
             "resume_run decides nothing."),
) -> None:
    """Serve run_code (your tools and those of the upstream MCP servers, composed by a
    sandboxed program) as an MCP server. Every call goes through one pipeline and one log.
    SIGTERM, SIGHUP and Ctrl-C stop it cleanly (exit 128 + signum)."""
    from .._mcp.serve import serving
    from ._stop import run

    if mode not in ("code", "both"):
        raise typer.BadParameter("--mode must be code or both")
    if transport not in ("stdio", "http"):
        raise typer.BadParameter("--transport must be stdio or http")
    if approvals not in ("elicit", "auto", "defer"):
        raise typer.BadParameter("--approvals must be elicit, auto or defer")
    token = _approval_token(approvals, approval_token_file)
    check_log(log)
    loaded = load_policy(policy)
    own = load_own_tools(tools)
    try:   # a stop signal cancels it: the session and its log close (`_stop.run`)
        run(serving(transport="http" if transport == "http" else "stdio", host=host,
                    port=port, mcp=mcp, mcp_urls=mcp_url, builtin=builtin, tools=own,
                    policy=loaded, log=log, mode=mode, call_timeout_s=mcp_timeout,
                    approvals=approvals, approval_token=token, approve_plans=approve_plans))
    except Exception as exc:   # an upstream that did not start, a port in use, ...
        raise setup_error(exc) from None


def _approval_token(approvals: str, path: Path | None) -> str | None:
    """The approval token `resume_run` checks (`read_approval_token`), read once; only
    `--approvals auto|defer` list `resume_run`, so a token file with `elicit` is an error."""
    from .._mcp.resume import ApprovalTokenError, read_approval_token

    if path is not None and approvals == "elicit":
        raise typer.BadParameter("--approval-token-file needs --approvals auto or defer "
                                 "(only they list resume_run)")
    try:
        return read_approval_token(path) if approvals != "elicit" else None
    except ApprovalTokenError as exc:
        print_error("error", str(exc))
        raise typer.Exit(EXIT_USAGE) from None
