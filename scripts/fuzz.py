"""Run the property-based robustness tests with many examples: the fuzz run.

    python scripts/fuzz.py [--examples N] [--kill-examples K] [BOUNDARY ...]

BOUNDARY is any of `guest` (values and sub-call batches a program sends through the raw host
imports), `log` (mutated JSONL and SQLite logs read back by every reader), `mcp` (replies
an MCP server process sends, edited as JSON and as bytes) and `kill` (kill -9 after every
event of a pause and a resume on both backends, then at K random events of a pause and of
its resumption); all four by default. Each property runs N examples (default 3000), the
random kills K (default 50; each is a few processes, seconds apiece). The same tests run in
the default suite with a few examples each.

Exit status: pytest's (0 when no example found an uncaught exception, a call waiting past
its cause, an untyped outcome or a log that does not reopen clean). Hypothesis prints the
smallest failing example it finds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BOUNDARIES = {
    "guest": ["tests/sandbox/test_host_imports.py", "tests/codemode/run/test_hostile_payloads.py",
              "-k", "any_"],
    "log": ["tests/codemode/cli/test_log_fuzz.py"],
    "mcp": ["tests/codemode/mcp/test_mcp_transport.py", "-k", "any_reply"],
    "kill": ["tests/codemode/run/test_kill_points.py"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("boundaries", nargs="*", metavar="BOUNDARY",
                        help=f"what to fuzz: {', '.join(BOUNDARIES)} (default: all)")
    parser.add_argument("--examples", type=int, default=3000,
                        help="examples per property (default 3000)")
    parser.add_argument("--kill-examples", type=int, default=50,
                        help="random kill points (default 50)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.boundaries) - set(BOUNDARIES))
    if unknown:
        parser.error(f"unknown boundary {unknown[0]!r} (choose from {', '.join(BOUNDARIES)})")
    status = 0
    for boundary in args.boundaries or list(BOUNDARIES):
        examples = args.kill_examples if boundary == "kill" else args.examples
        env = {**os.environ, "CODEMODE_FUZZ_EXAMPLES": str(examples),
               "CODEMODE_KILL_POINTS": "all"}
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:logging",
                   "-p", "no:cacheprovider", *BOUNDARIES[boundary]]
        print(f"fuzz {boundary}: {examples} examples per property", flush=True)
        done = subprocess.run(command, cwd=ROOT, env=env, check=False)
        status = status or done.returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
