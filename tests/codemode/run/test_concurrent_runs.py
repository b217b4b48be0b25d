"""Many `run_code` calls at once: runs never starve the threads that sync tool bodies need
(asyncio's default executor), so they all finish with the right values and a balanced log."""

import asyncio

import pytest

from codemode import CodeMode, Session, events, tool

CONCURRENT_RUNS = 32


@tool
def double(x: int) -> int:
    """A sync body: the pipeline runs it on asyncio's default executor."""
    return 2 * x


@tool
async def increment(x: int) -> int:
    """An async body: runs on the session's loop."""
    await asyncio.sleep(0)
    return x + 1


PROGRAM = """
import asyncio
first = double(x={n})
second = await increment(x=first)
pair = await asyncio.gather(double(x=second), increment(x=second))
[first, second, *pair]
"""


@pytest.fixture
def session(tmp_path):
    s = Session(tools=[double, increment], log=str(tmp_path / "session.jsonl"))
    CodeMode(s)
    yield s
    s.log.close()


async def test_concurrent_runs_with_sync_and_async_subcalls_all_finish(session):
    results = await asyncio.wait_for(
        asyncio.gather(*(session.call("run_code", {"code": PROGRAM.format(n=n)})
                         for n in range(CONCURRENT_RUNS))),
        timeout=300)       # a deadlock shows as this timeout, never as a slow pass
    for n, result in enumerate(results):
        assert not result.is_error, result.text
        first, second = 2 * n, 2 * n + 1
        assert result.value["result"] == [first, second, 2 * second, second + 1]
    logged = session.log.read()
    calls = [e for e in logged if isinstance(e, events.ToolCall)]
    settled = [e for e in logged if isinstance(e, events.ToolResult)]
    assert len(calls) == len(settled) == CONCURRENT_RUNS
    assert {e.call_id for e in calls} == {e.call_id for e in settled}
    started = [e for e in logged if isinstance(e, events.CodeDispatchStart)]
    done = [e for e in logged if isinstance(e, events.CodeDispatch)]
    assert len(started) == len(done) == 4 * CONCURRENT_RUNS
    assert {e.sub_call_id for e in started} == {e.sub_call_id for e in done}


@tool(concurrency_safe=True, blocking=False)
def add(a: int, b: int) -> int:
    """An inline sync body: a batch of it is served in the loop callback that received it."""
    return a + b


async def test_runs_served_in_one_callback_and_direct_calls_keep_the_log_whole(tmp_path):
    from codemode.pipeline.log import check

    session = Session(tools=[add], log=str(tmp_path / "session.jsonl"), mode="both")
    CodeMode(session)
    program = "total = 0\nfor i in range(40):\n    total = add(a=total, b=i)\ntotal"
    try:
        async with session.turn():
            runs = [session.call("run_code", {"code": program}) for _ in range(4)]
            direct = [session.call("add", {"a": n, "b": 1}) for n in range(40)]
            results = await asyncio.wait_for(asyncio.gather(*runs, *direct), timeout=300)
        logged = session.log.read()
    finally:
        session.log.close()
    assert [r.value["result"] for r in results[:4]] == [sum(range(40))] * 4
    assert [r.value for r in results[4:]] == [n + 1 for n in range(40)]
    assert check(logged, complete=True) == []
    calls = [e.call_id for e in logged if isinstance(e, events.ToolCall)]
    settled = [e.message.source.call_id for e in logged if isinstance(e, events.ToolResult)]
    assert sorted(calls) == sorted(settled) and len(calls) == 44
    for run in calls:                        # each run's sub-calls start and settle in order
        starts = [e.sub_call_id for e in logged
                  if isinstance(e, events.CodeDispatchStart) and e.parent_call_id == run]
        ends = [e.sub_call_id for e in logged
                if isinstance(e, events.CodeDispatch) and e.parent_call_id == run]
        assert starts == ends == ([f"{run}:code:{n}" for n in range(1, 41)] if starts else [])
