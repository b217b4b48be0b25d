"""What the type check before a run costs (docs/codemode.md "Type check before the run").

    python -m benchmarks.typecheck [--tools 10 100 1000] [--runs 5] [--mypy]

For each number of tools (each with a nested object argument and a nested output schema):

- first check: the first check of a tool set (stubs written, then ty on the program), ms;
- per run: each later check of the same tool set (ty on the program alone), median of
  `--runs`, ms;
- with `--mypy`, mypy's own check of the same program against the same stubs (imported
  as a module, no cache), once, ms: the checker not chosen.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from codemode._run.description import stubs_module
from codemode._run.stubs import ToolStub, build_stubs
from codemode._run.typecheck import TypeChecker

PROGRAM = """\
import asyncio
def pick(rows):
    return [r["id"] for r in rows["items"]]
first = tool_0(query={"text": "a", "filters": {"tags": ["x"], "limit": 5}}, page=1)
rest = await asyncio.gather(*[tool_1(query={"text": t}) for t in ("b", "c")])
[pick(first), len(rest)]
"""


def tool_schemas(n: int) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """`n` tools with a nested argument object and a nested result (MCP-sized schemas)."""
    query = {"type": "object", "properties": {
        "text": {"type": "string", "description": "What to look for."},
        "filters": {"type": "object", "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            "since": {"type": "string", "format": "date-time"}}}},
        "required": ["text"]}
    result = {"type": "object", "properties": {
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "id": {"type": "string"}, "score": {"type": "number"},
            "owner": {"type": "object", "properties": {"login": {"type": "string"}}}},
            "required": ["id"]}},
        "next": {"type": ["string", "null"]}}, "required": ["items"]}
    return [(f"tool_{i}", f"Tool number {i}.",
             {"type": "object", "properties": {"query": query,
                                               "page": {"type": "integer", "default": 1}},
              "required": ["query"]}, result) for i in range(n)]


async def _check_ms(checker: TypeChecker, stubs: tuple[ToolStub, ...]) -> float:
    started = time.perf_counter()
    errors = await checker.check(PROGRAM, stubs)
    elapsed = (time.perf_counter() - started) * 1000
    assert errors == (), errors
    return elapsed


def measure(n: int, runs: int) -> tuple[float, float]:
    """(first check ms, median later check ms) for `n` tools."""
    stubs = tuple(build_stubs(tool_schemas(n)))
    checker = TypeChecker()
    try:
        first = asyncio.run(_check_ms(checker, stubs))
        later = [asyncio.run(_check_ms(checker, stubs)) for _ in range(runs)]
    finally:
        checker.close()
    return first, statistics.median(later)


def mypy_ms(n: int) -> float:
    """One mypy check of the program against `n` tools' stubs (no cache), ms."""
    from mypy import api

    stubs = build_stubs(tool_schemas(n))
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "tools_stubs.py").write_text(stubs_module(stubs))
        program = Path(folder) / "program.py"
        program.write_text("from tools_stubs import *\nasync def main():\n"
                           + "".join(f"    {line}\n" for line in PROGRAM.splitlines()))
        started = time.perf_counter()
        api.run(["--no-incremental", "--cache-dir", f"{folder}/.cache", str(program)])
        return (time.perf_counter() - started) * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.typecheck")
    parser.add_argument("--tools", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mypy", action="store_true")
    args = parser.parse_args(argv)
    print(f"{'tools':>6} {'first check ms':>15} {'per run ms':>11}"
          + (f" {'mypy ms':>9}" if args.mypy else ""))
    for n in args.tools:
        first, later = measure(n, args.runs)
        row = f"{n:>6} {first:>15.1f} {later:>11.1f}"
        if args.mypy:
            row += f" {mypy_ms(n):>9.0f}"
        print(row)


if __name__ == "__main__":
    main()
