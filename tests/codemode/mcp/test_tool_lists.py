"""Tool lists that change, paginated listings, and several servers at once, against real
server processes (`fixtures/mcp_changing_server.py`, the reference git server) and a real
`codemode serve` process."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from codemode import CodeMode, Policy
from codemode._mcp.client import McpServer, McpStartError
from codemode._mcp.listing import MAX_TOOL_PAGES
from codemode._mcp.servers import McpTools, connect_servers, distinct_names
from codemode.pipeline import DuplicateToolError, Session, ToolDefinition
from codemode.sandbox import RestrictedSandbox, WasmSandbox
from tests.codemode.mcp.test_serve import stdio_serving, structured
from tests.conftest import ROOT, git_server

pytestmark = [pytest.mark.mcp, pytest.mark.asyncio]

CHANGING = (sys.executable, str(ROOT / "fixtures" / "mcp_changing_server.py"))


def changing(*options: str) -> tuple[str, ...]:
    return (*CHANGING, *options)


@contextlib.asynccontextmanager
async def governed(*commands: tuple[str, ...], sandbox: Any = None,
                   policy: Policy | None = None) -> AsyncIterator[tuple[Session, CodeMode]]:
    """A session with the servers' tools attached and `run_code` on it."""
    async with connect_servers(list(commands)) as servers:
        session = Session()
        detach = McpTools(servers).attach(session)
        mode = (policy.apply(session) if policy is not None else
                CodeMode(session, sandbox=sandbox or WasmSandbox()))
        try:
            yield session, mode
        finally:
            mode.close()
            detach()
            session.close()


async def run(session: Session, code: str) -> Any:
    result = await session.call("run_code", {"code": code})
    assert not result.is_error, result.content
    return result.value["result"]


async def fails(session: Session, code: str) -> str:
    result = await session.call("run_code", {"code": code})
    assert result.is_error
    return str(result.content)


# --------------------------------------------------------------------------- list_changed


@pytest.mark.slow
async def test_the_next_run_sees_a_tool_the_server_added_and_not_one_it_removed():
    async with governed(changing("--tools", "echo,old")) as (session, mode):
        assert "def old(" in mode.description()
        # The run that changes the list keeps the names it started with; a call to a tool
        # removed since fails as an unknown tool.
        seen, gone = await run(session, "add_tool(name='fresh')\nremove_tool(name='old')\n"
                                        "seen = 'fresh' in globals()\n"
                                        "try:\n    gone = old(text='x')\n"
                                        "except ToolCallError as e:\n    gone = str(e)\n"
                                        "[seen, gone]")
        assert seen is False and 'unknown tool "old"' in gone
        description = mode.description()
        assert "def fresh(" in description and "def old(" not in description
        assert await run(session, "fresh(text='hi')") == ":fresh:hi"
        # the type check knows the new listing too: a program calling a tool of it and the
        # removed one is refused before the run (a program naming no tool is not checked)
        assert "Name `old` used when not defined" in await fails(
            session, "fresh(text='first')\nold(text='gone')")


@pytest.mark.slow
async def test_a_policy_governs_a_tool_added_later():
    policy = Policy.from_data({"expose": ["*"], "rules": [
        {"tool": "fresh", "action": "deny", "reason": "not this one", "optional": True}]})
    async with governed(changing(), policy=policy) as (session, mode):
        await run(session, "add_tool(name='fresh')\nadd_tool(name='other')")
        assert "def fresh(" in mode.description()
        assert await run(session, "other(text='x')") == ":other:x"
        denied = await run(session, "try:\n    fresh(text='x')\nexcept ToolCallError as e:\n"
                                    "    r = str(e)\nr")
        assert "not this one" in denied


async def test_a_listener_hears_the_new_listing_before_the_call_that_caused_it_returns():
    async with await McpServer.connect(changing()) as server:
        heard: list[list[str]] = []
        server.on_tools_changed(lambda s: heard.append([d.name for d in s.definitions]))
        await server.call("add_tool", {"name": "fresh"})
        assert heard == [["echo", "fresh", "add_tool", "remove_tool"]]
        assert [t.name for t in server.tools] == heard[0]


# --------------------------------------------------------------------------- pages


async def test_every_page_of_a_paginated_listing_is_taken_in_order():
    async with await McpServer.connect(changing("--tools", "a,b,c,d", "--page-size", "1")) \
            as server:
        assert [d.name for d in server.definitions] == ["a", "b", "c", "d", "add_tool",
                                                        "remove_tool"]


async def test_a_repeating_cursor_ends_start_up_at_once_with_an_error_naming_the_server():
    started = time.monotonic()
    with pytest.raises(McpStartError) as caught:
        await McpServer.connect(changing("--cursor", "repeat"), name="looping",
                                startup_timeout_s=120)
    assert time.monotonic() - started < 60          # not the startup timeout
    assert caught.value.server == "looping"
    message = str(caught.value)
    assert "'looping'" in message and "'again'" in message and "already given" in message


@pytest.mark.slow
async def test_a_listing_of_endless_pages_stops_at_the_bound():
    with pytest.raises(McpStartError) as caught:
        await McpServer.connect(changing("--cursor", "endless"), name="endless",
                                startup_timeout_s=300)
    assert f"more than {MAX_TOOL_PAGES} pages" in str(caught.value)
    assert "'endless'" in str(caught.value)


# --------------------------------------------------------------------------- several servers


async def test_distinct_names_suffix_the_later_duplicates():
    assert distinct_names(["git", "time", "git", "git"]) == ["git", "time", "git_2", "git_3"]


@pytest.mark.slow
async def test_two_instances_of_one_server_work_side_by_side():
    async with governed(changing("--label", "one", "--tools", "echo,only_one"),
                        changing("--label", "two")) as (session, mode):
        names = sorted(d.name for d in session.visible_tools())
        assert names == sorted([
            "mcp_changing_server.echo", "mcp_changing_server_2.echo",
            "mcp_changing_server.add_tool", "mcp_changing_server_2.add_tool",
            "mcp_changing_server.remove_tool", "mcp_changing_server_2.remove_tool",
            "only_one"])
        description = mode.description()
        for alias in ("mcp_changing_server_echo", "mcp_changing_server_2_echo", "only_one"):
            assert f"def {alias}(" in description
        assert await run(session, "[mcp_changing_server_echo(text='a'), "
                                  "mcp_changing_server_2_echo(text='b'), only_one(text='c')]"
                         ) == ["one:echo:a", "two:echo:b", "one:only_one:c"]
        # A name offered by a second server later becomes prefixed for both.
        await run(session, "mcp_changing_server_2_add_tool(name='only_one')")
        assert "only_one" not in {d.name for d in session.visible_tools()}
        assert await run(session, "[mcp_changing_server_only_one(text='x'), "
                                  "mcp_changing_server_2_only_one(text='y')]"
                         ) == ["one:only_one:x", "two:only_one:y"]


@pytest.mark.slow
async def test_two_git_servers_on_two_repositories(tmp_path: Path):
    from codemode.fixtures.git_repo import make_repo

    first, second = make_repo(tmp_path / "first"), make_repo(tmp_path / "second")
    (second / "only_here.txt").write_text("new\n")
    async with governed(git_server(first), git_server(second)) as (session, _mode):
        status = await run(session, f"[mcp_server_git_git_status(repo_path={str(first)!r}), "
                                    f"mcp_server_git_2_git_status(repo_path={str(second)!r})]")
        assert "only_here.txt" not in status[0] and "only_here.txt" in status[1]


async def test_a_tool_name_taken_on_the_session_names_the_server():
    async with connect_servers([changing()]) as servers:
        session = Session(tools=[ToolDefinition(name="echo", description="mine",
                                                parameters={"type": "object"},
                                                execute=lambda args: "mine")])
        with pytest.raises(DuplicateToolError, match="mcp_changing_server"):
            McpTools(servers).attach(session)
        assert [d.name for d in session.visible_tools()] == ["echo"]


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", [WasmSandbox, RestrictedSandbox])
async def test_every_offered_name_is_callable_on_every_tier(sandbox: Any):
    async with governed(changing("--tools", "2fa,_private,__dunder__"),
                        sandbox=sandbox()) as (session, mode):
        description = mode.description()
        for alias in ("tool_2fa", "private", "dunder__"):
            assert f"def {alias}(" in description
        assert await run(session, "[tool_2fa(text='a'), private(text='b'), dunder__(text='c')]"
                         ) == [":2fa:a", ":_private:b", ":__dunder__:c"]


# --------------------------------------------------------------------------- serve


@pytest.mark.slow
async def test_serve_tells_its_client_when_run_code_changes():
    changed = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with stdio_serving("--mcp", shlex.join(changing()),
                             message_handler=on_message) as client:
        before = await client.list_tools()
        assert "def fresh(" not in before.tools[0].description
        result = await client.call_tool("run_code", {"code": "add_tool(name='fresh')"})
        assert not result.is_error, result.content
        await asyncio.wait_for(changed.wait(), 60)
        after = await client.list_tools()
        assert "def fresh(" in after.tools[0].description
        ran = await client.call_tool("run_code", {"code": "fresh(text='hi')"})
        assert structured(ran)["result"] == ":fresh:hi"


@pytest.mark.slow
async def test_codemode_run_with_two_instances_of_one_server(tmp_path: Path):
    import json
    import subprocess

    from codemode.fixtures.git_repo import make_repo

    first, second = make_repo(tmp_path / "first"), make_repo(tmp_path / "second")
    (second / "only_here.txt").write_text("new\n")
    program = tmp_path / "prog.py"
    program.write_text(f"[mcp_server_git_git_status(repo_path={str(first)!r}), "
                       f"mcp_server_git_2_git_status(repo_path={str(second)!r})]\n")
    done = subprocess.run(
        [sys.executable, "-m", "codemode", "run", str(program), "--json",
         "--mcp", shlex.join(git_server(first)), "--mcp", shlex.join(git_server(second))],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads(done.stdout)["value"]
    assert "only_here.txt" not in status[0] and "only_here.txt" in status[1]


@pytest.mark.slow
async def test_an_index_of_several_servers_is_grouped_by_server():
    many = (sys.executable, "-m", "codemode.fixtures.mcp_many_tools_server", "120")
    async with governed(many, many) as (session, mode):
        mode.description_budget = 8_000
        index = mode.description().split("Tool index", 1)[1].splitlines()
        assert "grouped by server;" in index[0]
        groups = {d.group for d in session.visible_tools() if d.name != "run_code"}
        assert len(groups) == 2 and "" not in groups
        shown = [line.split("]", 1)[0][1:] for line in index[1:] if line.startswith("[")]
        assert sorted(shown) == sorted(groups)
        # the tools of one server are one group, whatever their names' prefixes
        assert len({d.name.split(".")[-1].split("_")[0]
                    for d in session.visible_tools()}) > 2
