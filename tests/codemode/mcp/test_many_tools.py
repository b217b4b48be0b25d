"""Thousands of tools over a real MCP server process (`fixtures/mcp_many_tools_server.py`):
`run_code`'s description stays within its default budget, a program finds, describes and
calls a tool the description did not show, governed like any call, and a tool the policy
hides is never found (docs/codemode.md "A description with a budget", "Finding tools from
a program")."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from codemode import Policy, Session
from codemode._mcp.client import McpServer
from codemode._run.budget import DEFAULT_DESCRIPTION_BUDGET
from codemode.fixtures.mcp_many_tools_server import tool_name

SERVER = [sys.executable, "-m", "codemode.fixtures.mcp_many_tools_server"]


@pytest.mark.slow
@pytest.mark.parametrize("count", [1000, 5000])
async def test_thousands_of_tools_fit_the_budget_and_are_found(count: int,
                                                               tmp_path: Path) -> None:
    server = await McpServer.connect([*SERVER, str(count)], startup_timeout_s=600)
    try:
        session = Session(tools=server.definitions, log=tmp_path / "session.jsonl")
        policy = Policy.from_data({
            "expose": ["*_list_*", "*_get_*", "*_create_*", "*_update_*", "*_archive_*",
                       "*_export_*", "*_search_*"],           # every `*_delete_*` is hidden
            "rules": [{"tool": "*_archive_*", "action": "deny", "reason": "no archiving"}],
            "limits": {"wall_clock_s": 300}})
        mode = policy.apply(session)
        text = mode.description()
        assert len(text) <= DEFAULT_DESCRIPTION_BUDGET <= 100_000
        assert "_delete_" not in text
        names = [tool_name(k) for k in range(count)]
        target = next(n for n in reversed(names) if "_export_" in n)
        archive = next(n for n in reversed(names) if "_archive_" in n)
        hidden = next(n for n in reversed(names) if "_delete_" in n)
        assert f"def {target}(" not in text          # its signature is not shown
        service, _, resource = target.split("_", 2)
        program = textwrap.dedent(f"""\
            hits = search_tools("{service} export {resource}", limit=5)
            shown = describe(hits[0]["name"])
            value = call_tool(hits[0]["tool"], id="r-1", page=2)
            try:
                call_tool("{archive}", id="r-1")
            except ToolDenied as exc:
                denied = exc.message
            found = [h["name"] for q in ("delete", "{service} delete {resource}")
                     for h in search_tools(q, limit=50)]
            try:
                describe("{hidden}")
            except ToolNotFound as exc:
                missing = exc.message
            [hits[0]["name"], next(l for l in shown.splitlines() if l.startswith("def ")),
             value["items"][0]["id"], denied,
             found, missing]
            """)
        result = await session.call("run_code", {"code": program})
        assert not result.is_error, result.content
        first, shown_line, item_id, denied, found, missing = result.value["result"]
        assert first == target
        assert shown_line.startswith(f"def {target}(id: str, filter: ")
        assert item_id == "r-1" and denied == "no archiving"
        assert not any("_delete_" in name for name in found)
        assert hidden not in missing.replace(f"no tool named {hidden!r}", "")
        assert result.value["subcalls"]["by_tool"] == {target: 1, archive: 1}
        assert result.value["subcalls"]["discovery"] == {"search_tools": 3, "describe": 2}
        await session.aclose()
    finally:
        await server.aclose()
