"""What following a plan approval costs a run as the session log grows (docs/codemode.md
"Plan before the run").

    python -m benchmarks.approvals [--earlier 1000 10000] [--rounds 5]

For each log backend (JSONL, SQLite) and each `--earlier` count: a session whose log
already holds about that many events (a program's calls of a tool no rule governs), then
a program that sends 5 notes with a tool an `ask` rule governs (restricted-in-process tier,
so the sandbox costs little), followed each time by a fresh plan approval (`run_approved`:
the log is read for earlier uses of the approval, the run logs its marker, each send's
approval is logged); and, as the baseline, the same program with a twin tool an `allow`
rule governs, as a plain `run_code` call, in the same session and log. `--rounds` of each,
alternating; the best time of each and their ratio. The plans are made before the timing
starts.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.quotas import fill_log, ping, send_note
from codemode import Policy, Session, approve_plan, run_approved, tool

PROGRAM = """for name in ["ann", "bob", "cy", "dee", "eve"]:
    send_note(to=name)"""
POLICY = {"tier": "restricted-in-process",
          "rules": [{"tool": "send_note", "action": "ask"},
                    {"tool": "post_note", "action": "allow"}]}


@tool(blocking=False)
def post_note(to: str) -> str:
    """An `allow` rule governs this one: `send_note`'s twin."""
    return to


async def best_times(log: Path, earlier: int, rounds: int) -> tuple[float, float]:
    """(best seconds with an approval, best seconds allowed without one)."""
    session = Session(tools=[ping, send_note, post_note], log=log)
    mode = Policy.from_data(POLICY).apply(session)
    await fill_log(session, earlier)
    approvals = [approve_plan(mode, await mode.plan(PROGRAM)) for _ in range(rounds)]
    twin = {"code": PROGRAM.replace("send_note", "post_note")}
    approved, plain = float("inf"), float("inf")
    for approval in approvals:
        approved = min(approved, await _timed(run_approved(mode, approval)))
        plain = min(plain, await _timed(session.call("run_code", twin)))
    await session.aclose()
    return approved, plain


async def _timed(call: Any) -> float:
    started = time.perf_counter()
    result = await call
    assert not result.is_error and result.value.get("status") != "pending", result.text
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--earlier", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        for suffix in ("jsonl", "db"):
            for earlier in args.earlier:
                approved, plain = asyncio.run(best_times(
                    Path(folder) / f"{earlier}.{suffix}", earlier, args.rounds))
                print(f"{suffix:5} {earlier:>6} earlier events: {approved * 1e3:6.2f} ms with "
                      f"an approval, {plain * 1e3:6.2f} ms allowed without one "
                      f"({approved / plain:.2f}x)")


if __name__ == "__main__":
    main()
