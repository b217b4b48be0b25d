"""Instances made ahead of use (`sandbox/_pool.py`): each serves exactly one run, a run
never sees another run's state, the pool works in the background within its bounds, and a
made-ahead instance is under the run's own limits and captures."""

import threading
import time

import msgspec
import pytest

from codemode.sandbox import (
    ParamSpec,
    RunRequest,
    SandboxLimits,
    SubCallOk,
    SubCallReply,
    Tape,
    ToolSpec,
    WasmSandbox,
    _component,
    _host,
    _pool,
    _wasm,
)

from .conftest import noop

# What one run leaves behind everywhere a program can write: its globals, a module's
# attributes, builtins, sys, sys.modules; the next run reports what it finds.
LEAVE = """
import json, sys, types
left = "run-{n}"
json.left = left
import statistics
statistics.mean = lambda data: "tampered"
sys.left = left
sys.modules["left_module"] = types.ModuleType("left_module")
b = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
b["left_builtin"] = left
print("left", left)
"""
FIND = """
import json, sys
b = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
[name for name, seen in (("globals", "left" in globals()), ("json", hasattr(json, "left")),
 ("statistics.mean", __import__("statistics").mean([1]) == "tampered"),
 ("builtins", "left_builtin" in b),
 ("sys", hasattr(sys, "left")), ("sys.modules", "left_module" in sys.modules)) if seen]
"""
SEEN_ALL = ["globals", "json", "statistics.mean", "builtins", "sys", "sys.modules"]




def wait_for(predicate, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "the pool did not get ready in time"
        time.sleep(0.01)


def closed(store):
    try:
        store.ptr()
    except ValueError:          # wasmtime-py: "already closed"
        return True
    return False


def runtime_for(limits):
    config = _component.EngineConfig(fuel=limits.fuel is not None,
                                     stack_bytes=limits.stack_bytes)
    return _component.runtime_for(config, _wasm._host_dispatch, _wasm._host_sleep,
                                  _wasm._SHADOWS)


def prepared_ready(pool, runtime, memory_bytes):
    with pool._lock:
        entry = pool._entries.get((id(runtime), memory_bytes))
        return bool(entry and entry.ready and entry.ready[0].prepared)


@pytest.fixture
def pool(monkeypatch):
    """A pool of its own as the sandbox's, so each test sees only its own instances."""
    WasmSandbox().run(RunRequest(code="1"), noop)             # loads the component
    own = _pool.InstancePool(_wasm._in_background, size=1)
    monkeypatch.setattr(_wasm, "POOL", own)
    yield own
    own.clear()


def asked(pool, runtime, memory_bytes):
    """Take from the pool for a run and hand back the Store that run used, as a run does;
    returns what the take gave."""
    fresh = pool.take(runtime, memory_bytes)
    pool.retire(fresh or _pool.Fresh.new(runtime, memory_bytes))
    return fresh


def run_prepared(pool, code, limits=None):
    """Run `code` in a made-ahead, prepared instance (waiting until one is ready)."""
    limits = limits or SandboxLimits()
    runtime = runtime_for(limits)
    asked(pool, runtime, limits.memory_bytes)
    wait_for(lambda: prepared_ready(pool, runtime, limits.memory_bytes))
    return WasmSandbox().run(RunRequest(code=code, limits=limits), noop)


def test_a_run_in_a_made_ahead_instance_never_sees_another_runs_state(pool):
    same_run = run_prepared(pool, LEAVE.format(n=0) + FIND)
    assert same_run.value == SEEN_ALL                 # the probe sees what a run leaves
    assert same_run.stdout == "left run-0\n"
    for n in range(3):
        left = run_prepared(pool, LEAVE.format(n=n))
        assert left.status == "ok" and left.stdout == f"left run-{n}\n", left.error
        found = run_prepared(pool, FIND)
        assert found.status == "ok" and found.value == [] and found.stdout == "", found


def test_each_instance_serves_one_run_and_the_pool_refills_in_the_background(pool):
    limits = SandboxLimits()
    runtime = runtime_for(limits)
    assert pool.take(runtime, limits.memory_bytes) is None     # nothing ready yet
    pool.retire(_pool.Fresh.new(runtime, limits.memory_bytes))  # that run's Store
    wait_for(lambda: prepared_ready(pool, runtime, limits.memory_bytes))
    first = pool.take(runtime, limits.memory_bytes)
    assert first is not None and first.prepared and pool.ready(runtime, limits.memory_bytes) == 0
    assert asked(pool, runtime, limits.memory_bytes) is None   # handed out once only
    pool.retire(first)
    wait_for(lambda: closed(first.store))                     # closed in the background
    wait_for(lambda: prepared_ready(pool, runtime, limits.memory_bytes))
    second = pool.take(runtime, limits.memory_bytes)
    assert second is not None and second.store is not first.store
    assert pool.ready(runtime, limits.memory_bytes) == 0      # never more than `size`
    pool.retire(second)


def test_a_run_wakes_no_thread_for_the_pool_the_epoch_tickers_tick_starts_its_refill(
        monkeypatch):
    """The background that refills the pool is started from the epoch ticker's thread
    once the process is quiet, never from a run's thread (as the run starts or ends)."""
    WasmSandbox().run(RunRequest(code="1"), noop)             # the ticker runs from here on
    starters, tickers, run_threads = [], set(), []

    def submit(fn):
        starters.append(threading.get_ident())
        return _wasm._in_background(fn)
    own = _pool.InstancePool(submit, size=1)
    ticked = own.tick

    def tick():
        ticked()                      # (recorded after: once seen, the pool counts as ticked)
        tickers.add(threading.get_ident())
    monkeypatch.setattr(own, "tick", tick)
    monkeypatch.setattr(_wasm, "POOL", own)

    def dispatch(batch):
        run_threads.append(threading.get_ident())
        return SubCallReply(results=tuple(SubCallOk(id=c.id, value=c.arguments["value"])
                                          for c in batch.calls))
    echo = (ToolSpec(name="echo", alias="echo", params=(ParamSpec(name="value"),)),)
    limits = SandboxLimits()
    runtime = runtime_for(limits)
    wait_for(lambda: tickers)         # (a pool not ticked yet is started by `retire`)
    for n in range(3):
        out = WasmSandbox().run(RunRequest(code=f"echo(value={n})", tools=echo), dispatch)
        assert out.status == "ok" and out.value == n, out
        wait_for(lambda: prepared_ready(own, runtime, limits.memory_bytes))
    assert starters and set(starters) <= tickers
    assert not set(run_threads) & set(starters)
    own.clear()


def test_a_gap_of_a_few_milliseconds_between_runs_is_not_idle_time(pool):
    """A process waiting for a time slice on a busy machine sees gaps of a few ms between
    back-to-back runs; the pool must not prepare instances in them (docs/benchmarks.md)."""
    started = []
    own = _pool.InstancePool(started.append, size=1)
    own.tick()                                   # ticked: `tick` starts its background
    limits = SandboxLimits()
    runtime = runtime_for(limits)
    assert own.take(runtime, limits.memory_bytes) is None       # a run, with nothing ready
    own.retire(_pool.Fresh.new(runtime, limits.memory_bytes))    # ... and its Store back
    try:
        for gap_s, starts in ((0.004, False), (0.006, True)):
            own._last_activity = time.monotonic() - gap_s        # the last run ended then
            own.tick()
            assert bool(started) is starts, gap_s
    finally:
        for fresh in own._retired:
            fresh.close()


def test_an_instance_is_drained_from_when_it_is_made_so_a_write_before_its_run_never_blocks(
        pool):
    """The drain watches an instance's pipes from when it is made: more output than a
    pipe holds, written before any run is bound to it, never blocks the instance."""
    limits = SandboxLimits()
    runtime = runtime_for(limits)
    fresh = _pool.Fresh.new(runtime, limits.memory_bytes)
    big = ('{"code": "print(\'x\' * 300_000)\\n1", "tools": [], '
           '"limits": {"output_bytes": 1000000}}')

    def unbound_run():
        fresh.store.set_epoch_deadline(1 << 40)
        fresh.instantiate()
        return _wasm.decode_guest(fresh.call(big))
    try:     # on a runner thread (wasm's stack), waited for with a bound: a block fails
        answer = _wasm._RUNNERS.submit(unbound_run).result(timeout=60)
        assert answer == _host.GuestOk(value=msgspec.Raw(b"1"))
    finally:
        fresh.close()


def test_with_the_pool_off_each_run_closes_its_own_pipes(monkeypatch):
    import os

    WasmSandbox().run(RunRequest(code="1"), noop)
    monkeypatch.setattr(_wasm, "POOL", _pool.InstancePool(_wasm._in_background, size=0))
    fds = len(os.listdir("/proc/self/fd"))
    for n in range(10):
        assert WasmSandbox().run(RunRequest(code=f"print({n})"), noop).stdout == f"{n}\n"
    assert len(os.listdir("/proc/self/fd")) <= fds


def test_the_pool_keeps_to_its_bounds_and_size_zero_turns_it_off(pool):
    runtime = runtime_for(SandboxLimits())
    few = _pool.InstancePool(_wasm._in_background, size=1, max_keys=2)
    for mib in (32, 48, 64):
        assert asked(few, runtime, mib << 20) is None
    wait_for(lambda: few.ready(runtime, 64 << 20) == 1 and few.ready(runtime, 48 << 20) == 1)
    assert few.ready(runtime, 32 << 20) == 0                    # the oldest key was dropped
    few.clear()
    small = _pool.InstancePool(_wasm._in_background, size=4,
                               max_bytes=2 * _pool.INSTANCE_BYTES)
    asked(small, runtime, 64 << 20)
    wait_for(lambda: small.ready(runtime, 64 << 20) == 2)
    time.sleep(0.05)
    assert small.ready(runtime, 64 << 20) == 2                 # the memory bound holds
    small.clear()
    off = _pool.InstancePool(_wasm._in_background, size=0)
    assert off.take(runtime, 64 << 20) is None
    assert off.ready(runtime, 64 << 20) == 0
    with pytest.raises(ValueError, match="max_keys >= 1"):
        _pool.InstancePool(_wasm._in_background, size=-1)


def test_a_made_ahead_instance_runs_under_the_runs_own_fuel_and_deadline(pool):
    fuel = SandboxLimits(fuel=50_000_000)
    for _ in range(2):
        out = run_prepared(pool, "while True:\n    pass", fuel)
        assert out.status == "limit" and out.error.kind == "fuel", out
        assert out.fuel_used == 50_000_000
    timed = SandboxLimits(wall_clock_s=0.5)
    out = run_prepared(pool, "print('started')\nwhile True:\n    pass", timed)
    assert out.status == "limit" and out.error.kind == "timeout", out
    assert out.stdout == "started\n"


def test_a_recorded_run_never_takes_a_made_ahead_instance():
    """A prepared instance already read clocks and randomness in its warm-up, unrecorded;
    a run with a tape is instantiated on its path so that every read is on its tape."""
    limits = SandboxLimits()
    runtime = runtime_for(limits)
    WasmSandbox().run(RunRequest(code="0", limits=limits), noop)
    wait_for(lambda: _wasm.POOL.ready(runtime, limits.memory_bytes) == 1)
    outcome = WasmSandbox().run(RunRequest(code="import random\nrandom.random()", limits=limits,
                                           tape=Tape()), noop)
    assert outcome.status == "ok"
    assert outcome.tape is not None
    assert sum(len(getattr(e, "data", b"")) for e in outcome.tape.entries) >= 2496  # the seed
    assert _wasm.POOL.ready(runtime, limits.memory_bytes) == 1


def test_a_made_ahead_instance_shows_nothing_of_another_run_or_of_its_own_warm_up(pool):
    """The pool's preparation (the guest's warm-up program, its tool, its event loop and
    output) and the runs before leave nothing a run can find: heap, source, output,
    runtime state (the probes of `test_run_isolation`)."""
    from tests.sandbox.test_run_isolation import FIND_MORE, LEAVE_MORE, SEEN_MORE

    same_run = run_prepared(pool, LEAVE_MORE.format(n=0) + FIND_MORE)
    assert same_run.status == "ok" and same_run.value == SEEN_MORE, same_run
    warm_up = run_prepared(pool, "import linecache\n('echo' in globals(), "
                                 "'echo(value=' + '2)' in str(linecache.cache))")
    assert warm_up.status == "ok" and warm_up.value == {"$tuple": [False, False]}, warm_up
    for n in range(2):
        left = run_prepared(pool, LEAVE_MORE.format(n=n))
        assert left.status == "ok" and left.stdout == f"unflushed-{n}", left
        found = run_prepared(pool, FIND_MORE)
        assert found.status == "ok" and found.value == [], found
        assert (found.stdout, found.stderr) == ("", "")



def test_what_the_pool_prepares_for_a_run_carries_nothing_of_another_run(pool):
    """The objects the guest makes in the pool's warm-up for the instance's one run
    (`runtime.Prepared`) are that run's own: what a run leaves in its own is not found by
    the next run, in its made-ahead instance."""
    from tests.sandbox.test_run_isolation import (
        ECHO_TOOL,
        FIND_PREPARED,
        LEAVE_PREPARED,
        SEEN_PREPARED,
    )

    from .conftest import echo

    def run(code):
        limits = SandboxLimits()
        runtime = runtime_for(limits)
        asked(pool, runtime, limits.memory_bytes)
        wait_for(lambda: prepared_ready(pool, runtime, limits.memory_bytes))
        return WasmSandbox().run(RunRequest(code=code, tools=(ECHO_TOOL,)), echo)

    same_run = run(LEAVE_PREPARED.format(n=0) + FIND_PREPARED)
    assert same_run.status == "ok" and same_run.value == SEEN_PREPARED, same_run
    for n in range(2):
        assert run(LEAVE_PREPARED.format(n=n)).status == "ok"
        found = run(FIND_PREPARED)
        assert found.status == "ok" and found.value == [], found


# What a program sees of its tools: the globals bound to one, `tools.<alias>`, a call.
SEE_TOOLS = """
[sorted(n for n in ("echo", "shout") if n in globals()), dir(tools),
 (echo if "echo" in globals() else shout if "shout" in globals() else lambda value: None)(
     value=3)]
"""


def test_the_pool_binds_the_latest_runs_tools_ahead_and_a_run_with_other_tools_sees_only_its_own(
        pool, monkeypatch):
    """An instance made ahead is prepared with the tools of the key's latest run, and a run
    with those tools is sent none (`tools_prepared`); a run with other tools is sent its
    own, and the ones bound ahead are gone: it sees exactly the tools of its request."""
    from .conftest import echo

    limits = SandboxLimits()
    runtime = runtime_for(limits)
    sent: list[str] = []
    call = _pool.Fresh.call
    monkeypatch.setattr(_pool.Fresh, "call",
                        lambda self, text: sent.append(text) or call(self, text))
    echo_tool = ToolSpec(name="echo", alias="echo", params=(ParamSpec(name="value"),))
    shout_tool = ToolSpec(name="shout", alias="shout", params=(ParamSpec(name="value"),))

    def run(tools):
        wait_for(lambda: prepared_ready(pool, runtime, limits.memory_bytes))
        bound_ahead = pool._entries[(id(runtime), limits.memory_bytes)].ready[0].tools
        sent.clear()
        done = WasmSandbox().run(RunRequest(code=SEE_TOOLS, tools=tools, limits=limits), echo)
        assert done.status == "ok", done.error
        program = [text for text in sent if text.startswith('{"code"')]
        assert len(program) == 1
        return bound_ahead, '"tools_prepared":true' in program[0], done.value

    asked(pool, runtime, limits.memory_bytes)                # made ahead with no tools
    echo_json = bytes(_wasm._tools_json((echo_tool,)))
    shout_json = bytes(_wasm._tools_json((shout_tool,)))
    assert run((echo_tool,)) == (None, False, [["echo"], ["echo"], {"value": 3}])
    assert run((echo_tool,)) == (echo_json, True, [["echo"], ["echo"], {"value": 3}])
    assert run((shout_tool,)) == (echo_json, False, [["shout"], ["shout"], {"value": 3}])
    assert run((shout_tool,)) == (shout_json, True, [["shout"], ["shout"], {"value": 3}])
    assert run(()) == (shout_json, False, [[], [], None])


def test_a_run_told_its_tools_were_bound_ahead_when_none_were_fails_and_binds_nothing(pool):
    """`tools_prepared` reaches only an instance prepared with the run's tools; should the
    guest get it for one without (a host fault), the run fails rather than run with no
    tools or someone else's."""
    limits = SandboxLimits()
    runtime = runtime_for(limits)
    fresh = _pool.Fresh.new(runtime, limits.memory_bytes)
    told = '{"code": "1", "tools_prepared": true, "limits": {}}'

    def unprepared_run():
        fresh.store.set_epoch_deadline(1 << 40)
        fresh.instantiate()
        return _wasm.decode_guest(fresh.call(told))
    try:
        answer = _wasm._RUNNERS.submit(unprepared_run).result(timeout=60)
        assert isinstance(answer, _host.GuestFailed), answer
        assert "the host sent no tools, and none were bound ahead" in answer.error.message
    finally:
        fresh.close()
