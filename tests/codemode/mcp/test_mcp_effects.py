"""What a tool says its calls do, from a real MCP server's annotations (readOnlyHint,
destructiveHint, idempotentHint), from `@tool(...)` and from the policy, which wins; a dry
run's plan shows it per entry (docs/codemode.md "Plan before the run")."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from codemode import McpServer, Policy, Session, tool
from codemode.pipeline.log import MemoryLog

pytestmark = [pytest.mark.mcp, pytest.mark.slow]

SERVER = textwrap.dedent('''
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer("notes")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def list_notes() -> list[str]:
        """The notes' names."""
        return ["a", "b"]

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
    def delete_note(name: str) -> str:
        """Delete a note."""
        raise RuntimeError("a dry run never calls this")

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False))
    def add_note(name: str) -> str:
        """Add a note."""
        raise RuntimeError("a dry run never calls this")

    @server.tool()
    def touch_note(name: str) -> str:
        """Touch a note."""
        raise RuntimeError("a dry run never calls this")

    server.run()
''')

PROGRAM = """
for name in list_notes():
    delete_note(name=name)
add_note(name="c")
touch_note(name="c")
"""


@pytest.fixture
def server_script(tmp_path: Path) -> list[str]:
    path = tmp_path / "notes_server.py"
    path.write_text(SERVER, encoding="utf-8")
    return [sys.executable, str(path)]


async def plan_effects(command: list[str], policy: dict) -> list[tuple]:
    async with await McpServer.connect(command, name="notes") as server:
        session = Session(tools=list(server.definitions), log=MemoryLog())
        mode = Policy.from_data({"tier": "restricted-in-process", **policy}).apply(session)
        try:
            plan = await mode.plan(PROGRAM)
        finally:
            await session.aclose()
    return [(e.tool, e.destructive, e.idempotent) for e in plan.entries]


async def test_the_hints_of_a_real_mcp_server_reach_the_definitions_and_the_plan(
        server_script: list[str]) -> None:
    async with await McpServer.connect(server_script, name="notes") as server:
        said = {d.name: (d.read_only, d.destructive, d.idempotent) for d in server.definitions}
    assert said == {"list_notes": (True, None, None), "delete_note": (False, True, True),
                    "add_note": (False, False, False), "touch_note": (False, None, None)}
    assert await plan_effects(server_script, {}) == [
        ("delete_note", True, True), ("delete_note", True, True), ("add_note", False, False),
        ("touch_note", None, None)]


async def test_the_policy_wins_over_the_servers_hints(server_script: list[str]) -> None:
    policy = {"additive": ["delete_*"], "destructive": ["add_*", "touch_*"],
              "idempotent": ["touch_*"]}
    assert await plan_effects(server_script, policy) == [
        ("delete_note", False, True), ("delete_note", False, True), ("add_note", True, False),
        ("touch_note", True, True)]
    # `destructive` wins over `additive`, as `changes` does over `read_only`
    both = {"additive": ["*"], "destructive": ["delete_note"]}
    assert [e[1] for e in await plan_effects(server_script, both)] == [True, True, False, False]


def test_a_tool_says_it_with_its_decorator() -> None:
    @tool(destructive=True, idempotent=False)
    def drop_table(name: str) -> str:
        """Drop a table."""
        return name

    @tool
    def quiet() -> None:
        """Says nothing."""

    assert (drop_table.destructive, drop_table.idempotent) == (True, False)
    assert (quiet.destructive, quiet.idempotent) == (None, None)


async def test_the_mailbox_server_reads_for_real_in_a_dry_run(tmp_path: Path) -> None:
    # the docs' mailbox (`codemode.fixtures.mcp_mailbox_server`): its reads say readOnlyHint,
    # so a dry run reads the real mail, and the plan holds only the sends; the first was
    # made before any simulated value reached the program
    outbox = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "codemode.fixtures.mcp_mailbox_server", str(outbox)]
    async with await McpServer.connect(command, name="mailbox") as server:
        said = {d.name: (d.read_only, d.destructive, d.idempotent) for d in server.definitions}
        session = Session(tools=list(server.definitions), log=MemoryLog())
        mode = Policy.from_data({"tier": "restricted-in-process"}).apply(session)
        try:
            plan = await mode.plan('mail = read_email(id="m1")\n'
                                   'for to in ["a@example.com", "b@example.com"]:\n'
                                   '    send_email(to=to, subject="fwd", body=mail["body"])\n')
        finally:
            await session.aclose()
    assert said == {"list_inbox": (True, None, None), "read_email": (True, None, None),
                    "send_email": (False, False, False)}
    assert [(e.tool, e.arguments["to"]) for e in plan.entries] == [
        ("send_email", "a@example.com"), ("send_email", "b@example.com")]
    assert plan.entries[0].arguments["body"].startswith("Revenue was 4.2M")   # the real mail
    assert [e.after_simulated for e in plan.entries] == [False, True]
    assert not outbox.exists()                                              # nothing sent
