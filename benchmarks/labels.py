"""What labels and seals cost (docs/codemode.md "Labels", "Who can change a paused run").

    python -m benchmarks.labels [--subcalls 500] [--runs 5]

- net cost per sub-call of a run of `--subcalls` calls of a labelled tool, with no labels
  anywhere, with a `[[labels]]` entry only, and with a label rule checked on every call
  (`tool = "*"`, `when = { run_has = ... }`, a label the run never holds), against the
  same rule testing an argument (a rule makes runs record for a replay: that cost is not
  the labels'): median of `--runs` runs, in microseconds;
- sealing and checking one paused run's record of `--subcalls` answered calls (ms).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import time
from typing import Any

from codemode import Policy, Session
from codemode._run.seal import SealKey
from codemode.fixtures.mailbox import mailbox_tools

CASES: dict[str, dict[str, Any]] = {
    "no labels": {},
    "labels only": {"labels": [{"tool": "read_email", "label": "private"}]},
    "argument rule on every call": {
        "labels": [{"tool": "read_email", "label": "private"}],
        "rules": [{"tool": "*", "action": "deny", "when": {"arg": "id", "equals": "m9"}}]},
    "label rule on every call": {
        "labels": [{"tool": "read_email", "label": "private"}],
        "rules": [{"tool": "*", "action": "deny", "when": {"run_has": "secret"}}]},
}


async def _run_s(policy: dict[str, Any], program: str) -> float:
    session = Session(tools=mailbox_tools([]))
    Policy.from_data(policy).apply(session)
    await session.call("run_code", {"code": "1"})                 # warm
    started = time.perf_counter()
    result = await session.call("run_code", {"code": program})
    elapsed = time.perf_counter() - started
    assert not result.is_error, result.text
    await session.aclose()
    return elapsed


def per_call_us(subcalls: int, runs: int) -> dict[str, float]:
    program = f'for _ in range({subcalls}):\n    read_email(id="m2")\n'
    found = {}
    for name, policy in CASES.items():
        samples = [asyncio.run(_run_s(policy, program)) for _ in range(runs)]
        found[name] = statistics.median(samples) / subcalls * 1e6
    return found


def seal_ms(subcalls: int) -> tuple[float, float]:
    key = SealKey(secrets.token_bytes(32))
    exchanges = [{"calls": [{"id": i, "name": "read_email", "args": '{"id":"m2"}'}],
                  "replies": [{"id": i, "ok": True, "value": {"body": "x" * 80}}]}
                 for i in range(1, subcalls + 1)]
    fields: dict[str, Any] = dict(run_id="r", name="run_code", arguments={"code": "..."},
                                  requests=[], agent=None)
    state = {"code": "...", "exchanges": exchanges}
    started = time.perf_counter()
    sealed = key.sealed(state=state, **fields)
    signed = time.perf_counter() - started
    started = time.perf_counter()
    key.check(state=sealed, **fields)
    checked = time.perf_counter() - started
    return signed * 1e3, checked * 1e3


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.labels")
    parser.add_argument("--subcalls", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    figures = per_call_us(args.subcalls, args.runs)
    base = figures["no labels"]
    print(f"per sub-call, {args.subcalls} calls, median of {args.runs} runs:")
    for name, value in figures.items():
        print(f"  {name:<26} {value:8.1f} us  ({value - base:+.1f} us)")
    signed, checked = seal_ms(args.subcalls)
    print(f"seal a record of {args.subcalls} answered calls: {signed:.2f} ms; "
          f"check it: {checked:.2f} ms")


if __name__ == "__main__":
    main()
