"""Compare the language cases on the host's CPython and the wasm tier.

    python -m tests.language.regen --check          # every .out matches the wasm tier
    python -m tests.language.regen --diff [NAMES]   # host CPython vs wasm tier vs .out
    python -m tests.language.regen --write NAMES    # write .out from the wasm tier

The host may be an older CPython than the guest's 3.14: where the two differ, the expectation
is decided by hand (see docs/sandbox.md, "Language fidelity"); `--write` is for the cases
where the wasm output has been checked.
"""

from __future__ import annotations

import argparse
import difflib
import subprocess
import sys

from ._cases import Case, all_cases, run_wasm, show

_HOST = r"""
import linecache, sys
src = sys.stdin.read()
linecache.cache["<program>"] = (len(src), None, src.splitlines(True), "<program>")
exec(compile(src, "<program>", "exec"), {"__name__": "__main__"})
"""


def run_host(case: Case) -> str:
    done = subprocess.run([sys.executable, "-c", _HOST], input=case.source, text=True,
                          capture_output=True, timeout=60)
    text = done.stdout
    if done.returncode:
        text += f"[host exit {done.returncode}]\n{done.stderr}"
    return text


def _select(names: list[str]) -> list[Case]:
    cases = all_cases()
    if not names:
        return cases
    return [c for c in cases if any(c.id == n or c.id.startswith(n) for n in names)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--diff", action="store_true")
    mode.add_argument("--write", action="store_true")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    bad = 0
    for case in _select(args.names):
        wasm = show(run_wasm(case))
        expected = case.expected_path.read_text("utf-8") if case.expected_path.exists() else None
        if args.write:
            case.expected_path.write_text(wasm, "utf-8")
            continue
        if args.check:
            if (wasm == expected) == bool(case.xfail):
                bad += 1
                print(f"MISMATCH {case.id}" + (" (xfail case now passes)" if case.xfail else ""))
            continue
        host = run_host(case)
        if host == wasm and wasm == expected:
            continue
        bad += 1
        if expected is None:
            state = "missing"
        else:
            state = "==wasm" if expected == wasm else "!=wasm"
        print(f"==== {case.id}: host{'==' if host == wasm else '!='}wasm, expected {state}")
        for line in difflib.unified_diff(host.splitlines(), wasm.splitlines(), "host", "wasm",
                                         lineterm=""):
            print("   ", line)
    print(f"{bad} case(s) to look at", file=sys.stderr)
    return 1 if bad and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
