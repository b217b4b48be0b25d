"""What a quota costs a call as the session log grows (docs/codemode.md "Quotas").

    python -m benchmarks.quotas [--earlier 1000 10000] [--calls 200]

For each log backend (JSONL, SQLite) and each `--earlier` count: a session whose log already
holds about that many events (a program's calls of a tool no quota governs), then a program
making `--calls` calls of a tool a `[[quotas]]` entry governs (`per_session`, never reached;
restricted-in-process tier, so the sandbox costs little): calls per second, best of 3,
with the quota and without it (the same policy with no `[[quotas]]`).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from codemode import Policy, Session, tool

POLICY = {"tier": "restricted-in-process",
          "quotas": [{"tool": "send_*", "per_session": 10**9}]}


@tool(blocking=False)
def ping() -> str:
    """No quota governs this one."""
    return "pong"


@tool(blocking=False)
def send_note(to: str) -> str:
    """A quota governs this one."""
    return to


async def fill_log(session: Session, earlier: int) -> None:
    """Bring `session`'s log to about `earlier` events: one program calling `ping` (each
    call logs its start and its settle). `session` must offer `ping`."""
    missing = earlier - len(session.log.read())
    if missing > 0:
        await session.call("run_code", {"code": f"for _ in range({missing // 2}):\n    ping()"})


async def calls_per_s(log: Path, earlier: int, calls: int, quota: bool) -> float:
    session = Session(tools=[ping, send_note], log=log)
    Policy.from_data(POLICY if quota else {**POLICY, "quotas": []}).apply(session)
    await fill_log(session, earlier)
    best = 0.0
    program = f"for i in range({calls}):\n    send_note(to=str(i))"
    for _ in range(3):
        started = time.perf_counter()
        result = await session.call("run_code", {"code": program})
        assert not result.is_error, result.text
        best = max(best, calls / (time.perf_counter() - started))
    await session.aclose()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--earlier", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for suffix in ("jsonl", "db"):
            for earlier in args.earlier:
                rates = [asyncio.run(calls_per_s(Path(folder) / f"{quota}{earlier}.{suffix}",
                                                 earlier, args.calls, quota))
                         for quota in (True, False)]
                print(f"{suffix:5} {earlier:>6} earlier events: {rates[0]:6.0f} calls/s "
                      f"with the quota, {rates[1]:6.0f} without")


if __name__ == "__main__":
    main()
