"""A fresh instance per run: a run never sees another run's state, one after another or
at the same time."""

import concurrent.futures

from codemode.sandbox import RunRequest, WasmSandbox

# What one run leaves behind everywhere a program can write: its globals, a module's
# attributes, builtins, sys; the next run reports what it finds.
LEAVE = """
import json, sys
left = "run-{n}"
json.left = left
sys.left = left
b = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
b["left_builtin"] = left
"""
FIND = """
import json, sys
b = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
[name for name, seen in (("globals", "left" in globals()), ("json", hasattr(json, "left")),
 ("builtins", "left_builtin" in b), ("sys", hasattr(sys, "left"))) if seen]
"""


def noop(batch):
    return '{"results": []}'


def test_a_run_never_sees_another_runs_state_in_turn_or_at_once():
    sandbox = WasmSandbox()
    same_run = sandbox.run(RunRequest(code=LEAVE.format(n=0) + FIND), noop)
    assert same_run.value == ["globals", "json", "builtins", "sys"]      # the probe sees
    for n in range(4):
        left = sandbox.run(RunRequest(code=LEAVE.format(n=n)), noop)
        assert left.status == "ok", left.error
        found = sandbox.run(RunRequest(code=FIND), noop)
        assert found.status == "ok" and found.value == [], found
    with concurrent.futures.ThreadPoolExecutor(4) as threads:
        runs = [threads.submit(sandbox.run, RunRequest(code=(LEAVE.format(n=n) if n % 2
                                                               else FIND)), noop)
                for n in range(12)]
        outcomes = [r.result() for r in runs]
    assert all(o.status == "ok" for o in outcomes)
    assert [o.value for n, o in enumerate(outcomes) if n % 2 == 0] == [[]] * 6
