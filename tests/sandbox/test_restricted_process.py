"""RestrictedProcessSandbox on its own: C-level work the in-process tier cannot interrupt
or refuse ends as a limit in the worker process, the host's memory stays where it was,
workers are reused, recycled and replaced, and a worker holds none of the host's
environment. The contract it shares with the other tiers is in test_sandbox_contract.py,
test_pause.py and test_async_routes.py."""

import os
import signal
import threading
import time

import pytest

from codemode.sandbox import (
    RestrictedProcessSandbox,
    RestrictedSandbox,
    RunRequest,
    SandboxLimits,
    WorkerPool,
)

from .conftest import EchoHost, echo_tool

_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


@pytest.fixture(scope="module")
def pool():
    pool = WorkerPool()
    yield pool
    pool.close()


def run(sandbox, code, cancel=None, **limits):
    request = RunRequest(code=code, tools=(echo_tool(),),
                         limits=SandboxLimits(**{"wall_clock_s": 1.0,
                                                 "memory_bytes": 64 << 20, **limits}))
    return sandbox.run(request, EchoHost(), cancel)


# The four C-level attacks that held or grew the in-process tier's host: each is one C call
# that neither the tier's clock checks nor its up-front size checks see.
C_LEVEL = {
    "decimal-precision-bomb": ("import decimal\ndecimal.getcontext().prec = 10**8\n"
                               "x = decimal.Decimal(1) / decimal.Decimal(7)\nprint(len(str(x)))"),
    "catastrophic-regex": "import re\nprint(re.match(r'(a+)+$', 'a' * 40 + 'b'))",
    "huge-format-spec": "s = f'{0:>900000000}'\nprint(len(s))",
    "huge-exception-message": "raise ValueError('%0900000000d' % 0)",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(C_LEVEL))
def test_c_level_work_ends_as_a_limit_and_the_host_does_not_grow(pool, name):
    sandbox = RestrictedProcessSandbox(pool)
    run(sandbox, "print('warm')")
    before = rss_bytes()
    outcome = run(sandbox, C_LEVEL[name])
    assert outcome.status == "limit", outcome
    assert outcome.error.kind in ("timeout", "memory")
    assert rss_bytes() - before < 32 << 20
    assert run(sandbox, "print('next')").stdout == "next\n"     # a worker serves the next run


@pytest.mark.slow
def test_a_c_call_that_does_not_return_is_killed_at_the_wall_clock(pool):
    outcome = run(RestrictedProcessSandbox(pool), C_LEVEL["catastrophic-regex"])
    assert outcome.error.kind == "timeout"
    assert outcome.error.message == ("the run exceeded its wall-clock limit of 1.0 s; "
                                     "its worker process was killed")


def test_an_allocation_past_the_memory_limit_fails_in_the_worker(pool):
    outcome = run(RestrictedProcessSandbox(pool), "b = bytearray(1 << 30)\nlen(b)")
    assert (outcome.status, outcome.error.kind) == ("limit", "memory")


@pytest.mark.slow
def test_cancel_stops_a_run_held_in_a_c_call(pool):
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    outcome = run(RestrictedProcessSandbox(pool), C_LEVEL["catastrophic-regex"], cancel,
                  wall_clock_s=60.0)
    assert outcome.error.kind == "abort"


def test_a_worker_that_dies_mid_run_ends_the_run_as_a_crash_and_is_replaced():
    pool = WorkerPool()
    try:
        worker = pool.take()
        pool.give(worker, reuse=True)                 # idle: the next run takes it
        threading.Timer(0.5, os.kill, (worker.pid, signal.SIGKILL)).start()
        outcome = run(RestrictedProcessSandbox(pool), C_LEVEL["catastrophic-regex"],
                      wall_clock_s=60.0)
        assert (outcome.status, outcome.error.kind, outcome.error.message) == (
            "error", "trap", "the run's worker process died (exit status -9)")
        assert run(RestrictedProcessSandbox(pool), "print('after')").stdout == "after\n"
    finally:
        pool.close()


def test_sub_calls_reach_the_hosts_dispatch_and_are_counted_there(pool):
    host = EchoHost()
    request = RunRequest(code="[echo(value=i)['value'] for i in range(3)]",
                         tools=(echo_tool(),), limits=SandboxLimits(max_subcalls=2))
    outcome = RestrictedProcessSandbox(pool).run(request, host)
    assert [c["name"] for c in host.calls] == ["echo", "echo"]
    assert (outcome.status, outcome.error.kind, outcome.subcalls) == ("limit", "subcalls", 2)


def test_the_host_sees_each_batch_as_the_in_process_tier_sends_it(pool):
    """The worker's tier bounds a batch's wait before sending it; the host bounds it again
    and must still see a batch sent with no wait as `indefinite` (only those may pause)."""
    code = ("import asyncio\nprint(echo(value=1))\n"
            "async def main():\n    return await asyncio.gather(echo(value=2), echo(value=3))\n"
            "asyncio.run(main())")
    seen = []
    for sandbox in (RestrictedSandbox(), RestrictedProcessSandbox(pool)):
        host = EchoHost()
        request = RunRequest(code=code, tools=(echo_tool(),),
                             limits=SandboxLimits(wall_clock_s=30.0))
        assert sandbox.run(request, host).status == "ok"
        seen.append([(b["indefinite"], b["until"], [c["name"] for c in b["calls"]])
                     for b in host.batches])
    assert seen[0] == seen[1] and any(indefinite for indefinite, _, _ in seen[0])


def test_workers_are_reused_then_recycled_after_max_runs():
    pool = WorkerPool(max_runs=2)
    try:
        sandbox = RestrictedProcessSandbox(pool)
        run(sandbox, "1")
        first = pool.take()
        pool.give(first, reuse=True)                  # its second run: recycled
        assert not first.alive()
        for _ in range(2400):                         # its replacement, started meanwhile
            if pool.idle:
                break
            time.sleep(0.05)
        again = pool.take()
        assert again.pid != first.pid and again.alive() and pool.idle == 0
        pool.give(again, reuse=True)
        assert pool.take() is again                   # one run done: reused
    finally:
        pool.close()


def test_a_worker_holds_none_of_the_hosts_environment(monkeypatch):
    monkeypatch.setenv("CODEMODE_TEST_SECRET", "s3cret-value")
    pool = WorkerPool()
    try:
        worker = pool.take()
        with open(f"/proc/{worker.pid}/environ", "rb") as f:
            environ = f.read()
        assert b"s3cret-value" not in environ and b"CODEMODE_TEST_SECRET" not in environ
        pool.give(worker, reuse=False)
    finally:
        pool.close()


@pytest.mark.slow
def test_a_fresh_workers_first_run_may_print_past_a_mebibyte():
    # the worker's reader waits for its first run's messages before the run sets their cap
    fresh = WorkerPool()
    try:
        outcome = run(RestrictedProcessSandbox(fresh), "print('x' * 3_000_000)",
                      wall_clock_s=30.0, memory_bytes=256 << 20)
    finally:
        fresh.close()
    assert outcome.status == "ok", outcome.error
    assert outcome.full is not None and len(outcome.full.stdout) == 3_000_001


# What a run can change for the whole interpreter through the modules it may use, and a
# later run would see. Each `change` program changes it; each `probe` reads it back.
SHARED_STATE = {
    "abc-registration": ("import collections.abc\ncollections.abc.Sequence.register(int)",
                         "import collections.abc\nprint(isinstance(5, collections.abc.Sequence))"),
    "numbers-registration": ("import numbers\nnumbers.Integral.register(str)",
                             "import numbers\nprint(isinstance('x', numbers.Integral))"),
    "decimal-default-context": ("import decimal\ndecimal.DefaultContext.clear_traps()",
                                "import decimal\nprint(decimal.DefaultContext.traps["
                                "decimal.DivisionByZero])"),
    "io-registration": ("import io\nio.IOBase.register(dict)",
                        "import io\nprint(isinstance({}, io.IOBase))"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHARED_STATE))
def test_what_a_run_changes_for_the_interpreter_no_later_run_sees(name):
    change, probe = SHARED_STATE[name]
    one = WorkerPool(max_runs=100, keep_idle=1)
    try:
        sandbox = RestrictedProcessSandbox(one)
        before = run(sandbox, probe).stdout
        run(sandbox, change)                         # refused, or run and forgotten
        assert run(sandbox, probe).stdout == before, name
    finally:
        one.close()

