"""`codemode describe`: what the model sees of a setup, printed without running anything.

The setup is named as for `codemode serve` (`--tools`, `--mcp`, `--builtin`, `--policy`,
`--mode`), and what is printed is what an MCP client's `tools/list` gets from `serve` with
those options: `run_code` with its description (how to write a program, the importable
modules, the policy's limits, every exposed tool as a typed Python signature with its
docstring) and, with `--mode both`, the exposed tools themselves. The same `run_code`
description is what `codemode run` gives the program's tools and what `CodeMode` gives an
agent (`CodeMode.description()`). MCP servers named with `--mcp` are started to list their
tools, then stopped; nothing else runs.

Text (default): each tool as a `# NAME` heading, its description, and its arguments' JSON
Schema on one line. `--json`: `{"tools": [{"name", "description", "inputSchema",
"outputSchema"?, "annotations"?}, ...]}`, the MCP shape.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ._options import TOOLS, load_own_tools, load_policy, setup_error

if TYPE_CHECKING:
    from codemode.pipeline import ToolDefinition

    from .._policy.policy import Policy

DESCRIBE_HELP = (
    "Print what the model sees for a setup: the tools an MCP client lists from codemode "
    "serve with the same options, run_code first, with its description (how to write a "
    "program, the modules it may import, the limits of a run, every exposed tool as a typed "
    "Python signature with its docstring) and, with --mode both, the tools themselves.\n\n"
    "Nothing runs: MCP servers given with --mcp start only to list their tools. --json "
    "prints the same as MCP tools/list does.")
DESCRIBE_SHORT_HELP = "Print the description the model sees for a setup (tools, policy, mode)."


async def listed(*, tools: list[ToolDefinition], mcp: list[str], builtin: bool,
                 policy: Policy | None, mode: str) -> list[dict[str, Any]]:
    """The tools `codemode serve` lists for this setup, as MCP JSON objects.

    Raises:
        McpStartError: an MCP server did not start. PolicyError: the policy does not fit
            the tools (an `expose` that matches none, a rule naming a missing tool).
    """
    from .._mcp.serve import open_server

    async with open_server(mcp=mcp, builtin=builtin, tools=tools, policy=policy,
                           mode="both" if mode == "both" else "code") as server:
        return [tool.model_dump(mode="json", by_alias=True, exclude_none=True)
                for tool in server.tools()]


def as_text(tools: list[dict[str, Any]]) -> str:
    """Each tool as `# NAME`, its description, and `Arguments (JSON Schema): {...}`."""
    parts = []
    for tool in tools:
        schema = json.dumps(tool.get("inputSchema", {}), ensure_ascii=False)
        parts.append(f"# {tool['name']}\n\n{tool.get('description', '').rstrip()}\n\n"
                     f"Arguments (JSON Schema): {schema}\n")
    return "\n".join(parts)


def describe_command(
    tools: list[str] = TOOLS,
    mcp: list[str] = typer.Option(
        [], "--mcp", metavar="CMD",
        help='An MCP server over stdio whose tools to list, e.g. --mcp "mcp-server-time"; '
             "repeatable."),
    builtin: bool = typer.Option(False, "--builtin",
                                 help="Include the built-in fixture toolset."),
    policy: Path | None = typer.Option(
        None, "--policy", metavar="FILE",
        help="Apply a policy file (TOML): its tier's modules, its limits and the tools it "
             "exposes are what the description says."),
    mode: str = typer.Option("code", "--mode", metavar="code|both",
                             help="code: run_code only (as serve lists by default); both: "
                                  "the exposed tools too."),
    as_json: bool = typer.Option(False, "--json",
                                 help='Print {"tools": [...]} as MCP tools/list has them.'),
) -> None:
    """`codemode describe` (its help is `DESCRIBE_HELP`)."""
    from ._stop import run

    if mode not in ("code", "both"):
        raise typer.BadParameter("--mode must be code or both")
    loaded = load_policy(policy)
    own = load_own_tools(tools)
    try:
        found = run(listed(tools=own, mcp=mcp, builtin=builtin, policy=loaded, mode=mode))
    except Exception as exc:   # an MCP server that did not start, a policy that does not fit
        raise setup_error(exc) from None
    text = (json.dumps({"tools": found}, ensure_ascii=False, indent=2) + "\n" if as_json
            else as_text(found))
    sys.stdout.write(text)
