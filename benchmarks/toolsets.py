"""What the number of tools costs: `run_code`'s description, the time to a first result,
each run after it, and discovery (docs/benchmarks.md "Many tools").

    python -m benchmarks.toolsets [--counts 10,100,1000,5000] [--runs 5] [--rich]

For each count N, a real MCP server process with N tools of realistic nested schemas
(`fixtures/mcp_many_tools_server.py`; `--rich` adds `format`, bounds and integer outputs,
which the pipeline checks with `jsonschema`) is started, and measured in this process:

- `connect`: spawn, handshake, `tools/list` and the tools' definitions (`McpServer.connect`);
- `setup`: `Session` and `Policy().apply` (the tools' stubs and `run_code`'s description);
- `desc`: the description's characters with the default budget, and `full`: without one;
- `first`: the first `run_code` result of a program calling one tool; `connect` + `setup`
  + `first` is the time to a first result;
- `run`: the median of `--runs` more runs of the same program (the per-run overhead);
- `search`, `describe`: the median run of a program making one `search_tools` or one
  `describe` call (no tool), and `index`: the first search's cost of indexing the tools
  (`ToolIndex`, outside a run), once per set of tools.

Times are seconds, wall clock, on whatever else the machine is doing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from codemode import Policy, Session
from codemode._mcp.client import McpServer
from codemode._run.discovery import ToolIndex
from codemode.fixtures.mcp_many_tools_server import tool_name

from .run import _positive_int

COLUMNS = ("tools", "connect", "setup", "desc", "full", "first", "run", "index", "search",
           "describe")


async def _run(session: Session, code: str) -> float:
    start = time.perf_counter()
    result = await session.call("run_code", {"code": code})
    elapsed = time.perf_counter() - start
    if result.is_error:
        raise RuntimeError(f"the benchmark's program failed: {result.content}")
    return elapsed


async def measure(count: int, runs: int = 5, rich: bool = False) -> dict[str, Any]:
    """One row: the figures of the module docstring for `count` tools."""
    command = [sys.executable, "-m", "codemode.fixtures.mcp_many_tools_server", str(count)]
    start = time.perf_counter()
    server = await McpServer.connect(command + (["--rich"] if rich else []),
                                     startup_timeout_s=900)
    row: dict[str, Any] = {"tools": count, "connect": time.perf_counter() - start}
    try:
        start = time.perf_counter()
        session = Session(tools=server.definitions)
        mode = Policy.from_data({"limits": {"wall_clock_s": 600}}).apply(session)
        description = mode.description()
        row["setup"] = time.perf_counter() - start
        row["desc"] = len(description)
        mode.description_budget = None
        row["full"] = len(mode.description())
        target = tool_name(count - 1)
        call = f'{target}(id="x")["tool"]'
        row["first"] = await _run(session, call)
        row["run"] = statistics.median([await _run(session, call) for _ in range(runs)])
        stubs = mode.stubs()
        start = time.perf_counter()
        ToolIndex(stubs).search("warm up")
        row["index"] = time.perf_counter() - start
        row["search"] = statistics.median(
            [await _run(session, 'search_tools("export refunds")') for _ in range(runs)])
        row["describe"] = statistics.median(
            [await _run(session, f'describe("{target}")') for _ in range(runs)])
        await session.aclose()
    finally:
        await server.aclose()
    return row


def _cell(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as a fixed-width text table, one line a count."""
    lines = [" ".join(f"{c:>9}" for c in COLUMNS)]
    lines += [" ".join(f"{_cell(row[c]):>9}" for c in COLUMNS) for row in rows]
    return "\n".join(lines)


def _counts(text: str) -> list[int]:
    return [_positive_int(part.strip()) for part in text.split(",")]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.toolsets",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--counts", type=_counts, default=[10, 100, 1000, 5000],
                        help="numbers of tools, comma-separated (default 10,100,1000,5000)")
    parser.add_argument("--runs", type=_positive_int, default=5, help="runs per median")
    parser.add_argument("--rich", action="store_true",
                        help="schemas with formats, bounds and integer outputs")
    args = parser.parse_args(argv)
    rows = []
    for count in args.counts:
        rows.append(asyncio.run(measure(count, args.runs, args.rich)))
        print(f"measured {count} tools", file=sys.stderr, flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
