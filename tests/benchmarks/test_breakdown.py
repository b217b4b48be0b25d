"""`benchmarks.breakdown`: its timers count what they wrap, only when asked, and leave the
code as it was."""

import asyncio
import time

from benchmarks import breakdown


class Worker:
    def step(self, seconds):
        time.sleep(seconds)
        return "stepped"

    async def later(self, seconds):
        await asyncio.sleep(seconds)
        return "later"


def test_timers_count_sync_and_async_parts_then_restore_the_functions():
    original_step, original_later = Worker.step, Worker.later
    with breakdown.timing([(Worker, "step", "a"), (Worker, "later", "b")]) as totals:
        worker = Worker()
        assert worker.step(0.01) == "stepped"
        assert asyncio.run(worker.later(0.01)) == "later"
    assert totals["a"] >= 0.01 and totals["b"] >= 0.01
    assert (Worker.step, Worker.later) == (original_step, original_later)


def test_a_timer_counts_only_the_calls_its_predicate_accepts():
    with breakdown.timing([(Worker, "step", "a")],
                          lambda self, seconds: seconds > 0) as totals:
        Worker().step(0)
        assert totals["a"] == 0
        Worker().step(0.005)
    assert totals["a"] >= 0.005


def test_the_guest_times_its_own_parts_of_a_sub_call_only_when_asked():
    from benchmarks import _peers
    from codemode.sandbox import _pool, _wasm

    encoder, call = _wasm._REQUEST_ENCODER, _pool.Fresh.call
    answers = []

    def recorded(fresh, text):
        answers.append(call(fresh, text))
        return answers[-1]

    sandbox = _peers.make("sandbox")
    try:
        _total, guest, host = breakdown._guest_profiled(sandbox, 20)
        assert (_wasm._REQUEST_ENCODER, _pool.Fresh.call) == (encoder, call)   # restored
        _pool.Fresh.call = recorded
        try:
            assert sandbox.run("echo(value=1)\n2") == 2
        finally:
            _pool.Fresh.call = call
    finally:
        sandbox.close()
    assert set(guest) == {"encode", "dispatch", "decode", "clock", "compile", "namespace",
                          "program"}
    assert all(guest[part] > 0 for part in ("encode", "dispatch", "decode", "program"))
    # The guest's time in the import holds the host's part (the intervals nest).
    assert guest["dispatch"] > host > 0
    assert answers and all('"profile"' not in answer for answer in answers)   # not asked


def test_the_crossing_floor_calls_the_raw_import_and_restores_the_host():
    from benchmarks import _peers
    from codemode.sandbox import _host

    answer = _host.RunHost.dispatch_batch
    seen = []
    sandbox = _peers.make("sandbox")
    try:
        _host.RunHost.dispatch_batch = lambda self, batch: seen.append(batch) or answer(
            self, batch)
        try:
            alone, through_host = breakdown.crossing_floor(sandbox, 5)
        finally:
            _host.RunHost.dispatch_batch = answer
        assert sandbox.run("echo(value=1)\n2") == 2                        # the host restored
    finally:
        sandbox.close()
    # Through the host: the raw batch, 5 calls in each of 3 runs; the constant answer
    # replaced the host (and the wrapper above) for the second part.
    assert seen == [breakdown._RAW_DISPATCH.split("'")[1]] * 15
    assert all(isinstance(x, float) for x in (alone, through_host))


def test_the_guest_profiles_a_run_whose_tools_are_encoded_for_the_first_time():
    from benchmarks import _peers
    from codemode.sandbox import ParamSpec, ToolSpec

    tools = (ToolSpec(name="first_seen", alias="first_seen", params=(ParamSpec(name="x"),)),)
    sandbox = _peers.make("sandbox")
    try:
        with breakdown._guest_profiles() as profiles:
            assert sandbox.run("1", tools) == 1
    finally:
        sandbox.close()
    assert len(profiles) == 1 and profiles[0]["program"] > 0


def test_the_wake_timers_time_each_hand_off_between_threads_then_restore_them():
    import threading

    from codemode.sandbox import _runner

    loop = asyncio.new_event_loop()
    runners = _runner.Runners("codemode-test-wake")
    original_hand, counting = _runner.Runners._hand, threading.Event()
    try:
        with breakdown.wakes(loop, counting.is_set) as woken:
            assert runners.call(lambda: 1) == 1          # not counted: nothing recorded
            counting.set()
            woke = threading.Event()
            runners.call(lambda: loop.call_soon_threadsafe(woke.set))
            loop.run_until_complete(asyncio.sleep(0.01))
            assert woke.is_set()
            elsewhere = threading.Thread(target=lambda: runners.call(lambda: None))
            elsewhere.start()          # a hand-off from another thread: not the loop's
            elsewhere.join()
        assert (woken["runner wakes"], woken["loop wakes"]) == (1, 1)
        assert woken["runner"] > 0 and woken["loop"] > 0
        assert _runner.Runners._hand is original_hand
        assert "call_soon_threadsafe" not in vars(loop)
    finally:
        loop.close()
