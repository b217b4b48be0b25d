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
