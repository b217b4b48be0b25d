"""The fixture programs (`fixtures/programs/*.py`) end to end: real MCP servers, the built-in
toolset, the sandbox and the pipeline, checked by value and by session log.

Each program's first line names what it needs (`# tools: git, time, builtin`). Programs pass
`repo_path="."` to the git tools: the servers run with the repository of `fixtures.git_repo`
as their working directory (and, through the CLI, so does `codemode run`).
"""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from codemode import CodeMode, Session
from codemode._mcp.servers import connect_servers
from codemode.fixtures.toolset import builtin_tools
from tests.conftest import ROOT, TIME_SERVER, git_server

pytestmark = pytest.mark.mcp

PROGRAMS = ROOT / "fixtures" / "programs"
SERVERS = ("time", "git", "builtin")

# program -> (final value, sub-calls by tool name, how many of them failed)
EXPECTED: dict[str, tuple[Any, dict[str, int], int]] = {
    "gather_slow_calls": (
        {"calls": 20, "total_ms": 4000, "well_under_a_second": True}, {"sleep_ms": 20}, 0),
    "branch_overview": (
        {"commits": 4,
         "by_author": {"Ada Lovelace": 2, "Alan Turing": 1, "Grace Hopper": 1},
         "first": "Initial commit",
         "current": "main",
         "tips": {"feature/login": "Validate login input (Grace Hopper)",
                  "fix/typo": "Fix typo in README (Alan Turing)",
                  "main": "Document the command line (Ada Lovelace)"}},
        {"git_log": 1, "git_branch": 1, "git_show": 3}, 0),
    "working_tree_check": (
        {"modified": ["README.md"], "untracked": ["TODO.txt"],
         "diff": {"added": 2, "removed": 0},
         "branches": {"feature/login": "exists", "release/2.0": "ToolError: TOOL_ERROR",
                      "fix/typo": "exists"},
         "clean": False},
        {"git_status": 1, "git_diff_unstaged": 1, "git_show": 3}, 1),
    "meeting_planner": (
        {"available": ["Nairobi"],
         "schedule": {
             "Tokyo": {"local": "23:30", "offset": "+9.0h", "in_hours": False},
             "Bangalore": {"local": "20:00", "offset": "+5.5h", "in_hours": False},
             "Kathmandu": {"local": "20:15", "offset": "+5.75h", "in_hours": False},
             "Dubai": {"local": "18:30", "offset": "+4.0h", "in_hours": False},
             "Nairobi": {"local": "17:30", "offset": "+3.0h", "in_hours": True}},
         "unknown": ["Atlantis (TOOL_ERROR)"],
         "now_fields": ["datetime", "day_of_week", "is_dst", "timezone"]},
        {"convert_time": 6, "get_current_time": 1}, 1),
    "order_audit": (
        {"customers_without_orders": ["dee@example.com"],
         "totals": {"cancelled": 15.25, "pending": 99.0, "shipped": 1120.49},
         "biggest": "ord-1003 999.99",
         "errors": ["no order 'ord-9999'", "no order 'ORD-1001'", "INVALID_ARGS"],
         "help": ["The tool pipeline", "Policies"]},
        {"list_orders": 4, "get_order": 7, "add": 1, "search_docs": 1}, 3),
    "travel_brief": (
        {"lines": ["Tokyo: cloudy, 6C, lands 08:15 UTC = 12:15 Dubai",
                   "Paris: snow, 18C, lands 19:40 UTC = 23:40 Dubai",
                   "Cairo: cloudy, 15C, lands 23:05 UTC = 03:05 Dubai"],
         "coldest": "Tokyo", "spread_c": 12.0, "wet": ["Paris"]},
        {"get_weather": 3, "convert_time": 3, "add": 1}, 0),
    "commit_timeline": (
        {"timeline": [
            "2024-01-04 16:45 UTC / 01:45 JST  Document the command line - Ada",
            "2024-01-03 14:15 UTC / 23:15 JST  Fix off-by-one in pagination - Alan",
            "2024-01-02 10:30 UTC / 19:30 JST  Add configuration loader - Grace",
            "2024-01-01 09:00 UTC / 18:00 JST  Initial commit - Ada"],
         "after_hours": 2.0, "docs": ["doc-4"]},
        {"git_log": 1, "convert_time": 4, "add": 2, "search_docs": 1}, 0),
    "weather_alerts": (
        {"average_c": 16.1, "warm": ["Lima", "Sydney", "Denver"], "cold": ["Oslo"],
         "by_condition": {"cloudy": ["Cairo", "Tokyo"], "rain": ["Oslo", "Sydney"],
                          "snow": ["Lima", "Paris"], "windy": ["Denver", "London"]},
         "budget": "slow call abandoned"},
        {"get_weather": 8, "sleep_ms": 1}, 1),
}


def needs(source: str) -> list[str]:
    """The servers named by a program's `# tools: a, b` header (its first line)."""
    first = source.splitlines()[0]
    assert first.startswith("# tools: "), first
    names = [n.strip() for n in first.removeprefix("# tools: ").split(",")]
    assert names and set(names) <= set(SERVERS), names
    return names


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def check_log(events: list[dict[str, Any]], calls: dict[str, int], failed: int) -> None:
    """One tool/call and its tool/result (run_code); per sub-call exactly one
    tool/code-dispatch-start and one tool/code-dispatch, all under that call."""
    kinds = Counter(e["type"] for e in events)
    assert kinds["tool/call"] == kinds["tool/result"] == 1
    [outer] = [e for e in events if e["type"] == "tool/call"]
    assert outer["name"] == "run_code"
    starts = [e for e in events if e["type"] == "tool/code-dispatch-start"]
    done = [e for e in events if e["type"] == "tool/code-dispatch"]
    total = sum(calls.values())
    assert len(starts) == len(done) == total
    assert Counter(e["subCallId"] for e in starts) == Counter(e["subCallId"] for e in done)
    assert len({e["subCallId"] for e in done}) == total
    assert {e["rootCallId"] for e in starts + done} == {outer["callId"]}
    assert Counter(e["name"] for e in done) == Counter(calls)
    assert sum(1 for e in done if e["isError"]) == failed


def test_every_program_is_expected_and_well_formed():
    found = {p.stem: p.read_text(encoding="utf-8") for p in PROGRAMS.glob("*.py")}
    assert sorted(found) == sorted(EXPECTED)
    gathers = 0
    for name, source in found.items():
        needs(source)
        tree = compile(source, name, "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        assert isinstance(tree.body[-1], ast.Expr), f"{name}: no final expression"
        gathers += "asyncio.gather(" in source
        assert sum(EXPECTED[name][1].values()) >= 3
    assert gathers >= 3


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_program(name, git_repo, tmp_path):
    source = (PROGRAMS / f"{name}.py").read_text(encoding="utf-8")
    servers = needs(source)
    expected, calls, failed = EXPECTED[name]
    commands = [c for key, c in (("time", TIME_SERVER), ("git", git_server(git_repo)))
                if key in servers]
    log_path = tmp_path / "session.jsonl"
    async with connect_servers(commands, cwd=git_repo) as connected:   # repo_path="."
        tools = [d for s in connected for d in s.definitions]
        if "builtin" in servers:
            tools.extend(builtin_tools())
        session = Session(tools=tools, log=str(log_path))
        try:
            CodeMode(session)
            result = await session.call("run_code", {"code": source})
        finally:
            session.log.close()
    assert not result.is_error, result.text
    assert result.value["result"] == expected
    assert result.value["subcalls"]["total"] == sum(calls.values())
    assert result.value["subcalls"]["failed"] == failed
    check_log(read_log(log_path), calls, failed)


@pytest.mark.slow
def test_program_through_the_cli(git_repo, tmp_path):
    program = PROGRAMS / "commit_timeline.py"
    log_path = tmp_path / "cli.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run(
        [sys.executable, "-m", "codemode", "run", str(program),
         "--mcp", shlex.join(git_server(git_repo)), "--mcp", shlex.join(TIME_SERVER),
         "--builtin", "--json", "--log", str(log_path)],
        cwd=git_repo, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    output = json.loads(done.stdout)
    expected, calls, failed = EXPECTED["commit_timeline"]
    assert output["ok"] is True
    assert output["value"] == expected
    check_log(read_log(log_path), calls, failed)


def test_cli_reports_a_server_that_does_not_start(tmp_path):
    program = PROGRAMS / "branch_overview.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "codemode", "run", str(program),
         "--mcp", "no-such-mcp-server-xyz", "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "McpStartError: MCP server 'no-such-mcp-server-xyz' (no-such-mcp-server-xyz) " \
           "could not be started: command not found" in " ".join(done.stderr.split())
