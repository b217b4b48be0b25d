"""asyncio inside the guest with batched, concurrent sub-calls through the real pipeline."""

import re
import time
from pathlib import Path

import pytest

from codemode import CodeMode, RunContext, Session, events, tool
from codemode.fixtures.toolset import builtin_tools


@tool(concurrency_safe=True)
async def slow(ctx: RunContext, ms: int = 200) -> int:
    """Sleep on the host for `ms` milliseconds; stops early when the call is aborted."""
    import asyncio
    aborted = asyncio.ensure_future(ctx.signal.wait())
    try:
        await asyncio.wait([aborted], timeout=ms / 1000)
    finally:
        aborted.cancel()
    return ms


@pytest.fixture
def session(tmp_path):
    s = Session(tools=[*builtin_tools(), slow], log=str(tmp_path / "session.jsonl"))
    CodeMode(s)
    yield s
    s.log.close()


async def run(session, code):
    return await session.call("run_code", {"code": code})


def dispatches(session, kind=events.CodeDispatch):
    return [e for e in session.log.read() if isinstance(e, kind)]


@pytest.mark.slow
async def test_twenty_gathered_slow_calls_overlap(session):
    code = ("import asyncio\n"
            "values = await asyncio.gather(*(slow(ms=500) for _ in range(20)))\n"
            "sum(values)")
    started = time.perf_counter()
    result = await run(session, code)
    elapsed = time.perf_counter() - started
    assert not result.is_error, result.text
    assert result.value["result"] == 10000
    assert elapsed < 10.0 / 2                 # serially 20 x 500 ms = 10 s; 10 at a time: 1 s
    starts = dispatches(session, events.CodeDispatchStart)
    done = dispatches(session)
    assert sum(s.seq < done[0].seq for s in starts) > 1     # started before the first settled
    assert len(done) == 20
    assert len({e.sub_call_id for e in done}) == 20
    assert len({e.root_call_id for e in done}) == 1


async def test_sync_and_awaited_calls_mix(session):
    code = ("import asyncio\n"
            "a = add(a=1, b=2)\n"
            "async def main():\n"
            "    b = await add(a=3, b=4)\n"
            "    return b\n"
            "[a, asyncio.run(main())]")
    result = await run(session, code)
    assert result.value["result"] == [3, 7]


async def test_nested_gathers(session):
    code = ("import asyncio\n"
            "async def pair(i):\n"
            "    return await asyncio.gather(add(a=i, b=0), add(a=i, b=100))\n"
            "await asyncio.gather(*(pair(i) for i in range(3)))")
    result = await run(session, code)
    assert result.value["result"] == [[0, 100], [1, 101], [2, 102]]


async def test_rejection_inside_gather_raises_in_that_task(session):
    code = ("import asyncio\n"
            "try:\n"
            "    await asyncio.gather(add(a=1, b=1), fail(message='boom'))\n"
            "    outcome = 'no error'\n"
            "except ToolError as exc:\n"
            "    outcome = [exc.tool_name, exc.message]\n"
            "outcome")
    result = await run(session, code)
    assert result.value["result"] == ["fail", "boom"]


async def test_rejection_with_return_exceptions(session):
    code = ("import asyncio\n"
            "r = await asyncio.gather(add(a=1, b=1), fail(message='boom'),"
            " return_exceptions=True)\n"
            "[r[0], type(r[1]).__name__, r[1].message]")
    result = await run(session, code)
    assert result.value["result"] == [2, "ToolError", "boom"]


async def test_wait_for_times_out_on_a_slow_tool(session):
    code = ("import asyncio\n"
            "try:\n"
            "    await asyncio.wait_for(slow(ms=6000), timeout=0.2)\n"
            "    outcome = 'finished'\n"
            "except TimeoutError:\n"
            "    outcome = 'timed out'\n"
            "outcome")
    started = time.perf_counter()
    result = await run(session, code)
    assert result.value["result"] == "timed out"
    assert time.perf_counter() - started < 3.0      # the 6 s call was aborted, not awaited


async def test_task_cancelled_mid_call(session):
    code = ("import asyncio\n"
            "async def main():\n"
            "    task = asyncio.create_task(slow(ms=60000))\n"   # ends only by its abort
            "    await asyncio.sleep(0.1)\n"
            "    task.cancel()\n"
            "    try:\n"
            "        await task\n"
            "    except asyncio.CancelledError:\n"
            "        return 'cancelled'\n"
            "await main()")
    result = await run(session, code)
    assert result.value["result"] == "cancelled"
    [settled] = dispatches(session)
    assert settled.is_error                      # the host saw the abort and logged it


async def test_taskgroup_and_create_task(session):
    code = ("import asyncio\n"
            "async def main():\n"
            "    async with asyncio.TaskGroup() as tg:\n"
            "        ts = [tg.create_task(add(a=i, b=i)) for i in range(4)]\n"
            "    return [t.result() for t in ts]\n"
            "asyncio.run(main())")
    result = await run(session, code)
    assert result.value["result"] == [0, 2, 4, 6]


async def test_asyncio_sleep_works(session):
    result = await run(session, "import asyncio\nawait asyncio.sleep(0.05)\n'ok'")
    assert result.value["result"] == "ok"


async def test_deadlock_is_reported_not_hung(session):
    code = "import asyncio\nawait asyncio.Event().wait()"
    result = await run(session, code)
    assert result.is_error
    assert "deadlock" in result.text


async def test_concurrency_is_bounded_by_the_limit(tmp_path):
    from codemode.sandbox import SandboxLimits
    s = Session(tools=[slow], log=None)
    CodeMode(s, limits=SandboxLimits(max_concurrent_subcalls=2))
    code = ("import asyncio\n"
            "await asyncio.gather(*(slow(ms=200) for _ in range(4)))")
    started = time.perf_counter()
    result = await s.call("run_code", {"code": code})
    assert not result.is_error, result.text
    assert time.perf_counter() - started >= 0.4   # 4 calls, 2 at a time, 200 ms each


# ---- calls reach asyncio by any route, through the real pipeline ------------------------------

class Overlap:
    """Host-side record of how many `nap` bodies ran at once."""

    def __init__(self):
        self.running = 0
        self.most = 0


@pytest.fixture
def overlap():
    return Overlap()


@pytest.fixture
def nap_session(tmp_path, overlap):
    @tool(concurrency_safe=True)
    async def nap(ctx: RunContext, i: int, ms: int = 300) -> int:
        """Sleep `ms` milliseconds on the host, counting how many naps run at once."""
        import asyncio
        overlap.running += 1
        overlap.most = max(overlap.most, overlap.running)
        try:
            await asyncio.sleep(ms / 1000)
        finally:
            overlap.running -= 1
        return i

    s = Session(tools=[nap], log=str(tmp_path / "session.jsonl"))
    CodeMode(s)
    yield s
    s.log.close()


NAP_ROUTES = {
    "dict_comprehension": "d = {c: nap(i=n) for n, c in enumerate('abc')}\naws = d.values()",
    "map_lambda": "aws = map(lambda n: nap(i=n), range(3))",
    "helper_return": "def fetch(n):\n    return nap(i=n)\naws = [fetch(n) for n in range(3)]",
    "attribute": "class Box:\n    pass\nboxes = [Box() for _ in range(3)]\n"
                 "for n, box in enumerate(boxes):\n    box.call = nap(i=n)\n"
                 "aws = [box.call for box in boxes]",
    "append": "aws = []\nfor n in range(3):\n    aws.append(nap(i=n))",
}
NAP_ENTRIES = {
    "gather": "vals = await asyncio.gather(*aws)",
    "task_group": "async with asyncio.TaskGroup() as tg:\n"
                  "    tasks = [tg.create_task(a) for a in aws]\n"
                  "vals = [t.result() for t in tasks]",
}


@pytest.mark.parametrize("entry", NAP_ENTRIES)
@pytest.mark.parametrize("route", NAP_ROUTES)
async def test_calls_stored_any_way_overlap_through_the_pipeline(nap_session, overlap, route,
                                                                 entry):
    code = (f"import asyncio\n{NAP_ROUTES[route]}\n{NAP_ENTRIES[entry]}\n"
            "{'values': sorted(vals)}")
    result = await nap_session.call("run_code", {"code": code})
    assert not result.is_error, result.text
    assert result.value["result"]["values"] == [0, 1, 2]
    # All three bodies ran at once, as the host saw them (not wall time: a loaded machine
    # stretches any elapsed-time bound).
    assert overlap.most == 3


DOC = (Path(__file__).resolve().parents[3] / "docs" / "codemode.md").read_text()


async def test_the_async_example_in_the_docs_runs(session):
    section = DOC[DOC.index("## Async"):]
    [code] = re.findall(r"```python[^\n]*\n(.*?)```", section, flags=re.S)[:1]
    result = await run(session, code)
    assert not result.is_error, result.text
    first, total = result.value["result"]
    assert total > first > 0                          # ada has more than one order
    names = [e.name for e in dispatches(session, events.CodeDispatchStart)]
    assert names[0] == "list_orders" and len(names) > 2
    assert set(names[1:]) == {"get_order"}
