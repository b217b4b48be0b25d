"""Instances made ahead of use (`sandbox/_pool.py`): each serves exactly one run, a run
never sees another run's state, refills happen in the background within the bounds."""

import concurrent.futures
import time

import pytest

from codemode.sandbox import RunRequest, SandboxLimits, WasmSandbox, _component, _pool, _wasm

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


def wait_for(predicate, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "the pool did not refill in time"
        time.sleep(0.01)


def closed(store):
    try:
        store.ptr()
    except ValueError:          # wasmtime-py: "already closed"
        return True
    return False


@pytest.fixture
def runtime():
    WasmSandbox().run(RunRequest(code="1"), noop)             # loads the component
    config = _component.EngineConfig(fuel=False, stack_bytes=SandboxLimits().stack_bytes)
    return _component.runtime_for(config, _wasm._host_dispatch, _wasm._host_sleep)


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


def test_each_ready_instance_serves_one_run_and_the_pool_refills_in_the_background(runtime):
    pool = _pool.InstancePool(_wasm._in_background, size=2)
    first = pool.take(runtime, 64 << 20)
    assert first.run_func is None                      # nothing ready yet: run instantiates
    wait_for(lambda: pool.ready(runtime, 64 << 20) == 2)
    taken = [pool.take(runtime, 64 << 20) for _ in range(2)]
    assert all(t.run_func is not None for t in taken)
    assert len({id(t.store) for t in [first, *taken]}) == 3
    wait_for(lambda: pool.ready(runtime, 64 << 20) == 2)     # never more than `size`
    for fresh in [first, *taken]:
        pool.retire(fresh.store)
    wait_for(lambda: all(closed(f.store) for f in [first, *taken]))


def test_the_pool_keeps_at_most_max_keys_and_size_zero_turns_it_off(runtime):
    pool = _pool.InstancePool(_wasm._in_background, size=1, max_keys=2)
    for mib in (32, 48, 64):
        pool.take(runtime, mib << 20)
    wait_for(lambda: pool.ready(runtime, 64 << 20) == 1 and pool.ready(runtime, 48 << 20) == 1)
    assert pool.ready(runtime, 32 << 20) == 0                  # the oldest key was dropped
    off = _pool.InstancePool(_wasm._in_background, size=0)
    assert off.take(runtime, 64 << 20).run_func is None
    time.sleep(0.05)
    assert off.ready(runtime, 64 << 20) == 0
    with pytest.raises(ValueError, match="size must be >= 0"):
        _pool.InstancePool(_wasm._in_background, size=-1)


def test_a_ready_instance_still_gets_the_runs_own_fuel():
    sandbox = WasmSandbox()
    limits = SandboxLimits(fuel=50_000_000)
    for _ in range(3):                                  # the later runs use ready instances
        out = sandbox.run(RunRequest(code="while True:\n    pass", limits=limits), noop)
        assert out.status == "limit" and out.error.kind == "fuel"
        assert out.fuel_used == 50_000_000
