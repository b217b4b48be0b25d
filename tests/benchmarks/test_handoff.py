"""`python -m benchmarks.handoff`: the hand-off floors, and what coming back from idle costs."""

import time

from benchmarks import handoff


def test_after_idle_times_each_step_back_to_back_then_each_right_after_its_pause():
    gaps = []
    last = [time.perf_counter()]

    def step():
        now = time.perf_counter()
        gaps.append(now - last[0])
        last[0] = now

    hot, paced = handoff.after_idle(step, cycles=5, pause_s=0.01)
    assert len(gaps) == 15                       # 5 to warm up, 5 back to back, 5 paced
    assert all(gap >= 0.01 for gap in gaps[-5:])
    assert 0 <= hot and 0 <= paced


def test_the_handoff_command_prints_both_tables(capsys):
    handoff.main(["--cycles", "20", "--paced", "3", "--pause", "0.001"])
    out = capsys.readouterr().out
    assert "thread -> loop -> thread (call_soon_threadsafe + Lock)" in out
    assert "an event loop started and stopped for a no-op" in out
    assert "right after 1 ms of sleep" in out
