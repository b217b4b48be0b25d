"""The one scheduler (`codemode.pipeline.Scheduler`), driven alone over a session's pipeline:
ordered starts, the pool, the exclusive barrier, ordered commits, dropping and abandoning
(docs/pipeline-spec.md §2 S0, §11.4). Native batches and Code-Mode sub-calls both run on it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import pytest

from codemode.pipeline import (
    CallState,
    ExecutionInput,
    OutcomeUnknownError,
    Scheduled,
    Scheduler,
    Session,
    Signal,
)

from conftest import Turns, make_tool


class Trace:
    """Records what happened, in order: ("start", name), ("body", name), ("commit", name)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []
        self.running = 0
        self.peak = 0

    def tool(self, name: str, *, seconds: float = 0.0, safe: bool = True, stubborn: bool = False):
        async def body(args, ctx):
            self.items.append(("body", name))
            self.running += 1
            self.peak = max(self.peak, self.running)
            try:
                if stubborn:
                    await asyncio.sleep(seconds)  # ignores its signal
                elif seconds:
                    waiter = asyncio.ensure_future(ctx.signal.wait())
                    await asyncio.wait([waiter], timeout=seconds)
                    waiter.cancel()
            finally:
                self.running -= 1
            self.items.append(("end", name))
            return name

        return make_tool(name, body, is_concurrency_safe=(lambda args: True) if safe else None)


def scheduler(session: Session, trace: Trace, pool: int = 10) -> Scheduler:
    async def on_commit(call):
        trace.items.append(("commit", call.input.call_id))

    return Scheduler(
        session.prepare,
        pool=pool,
        exclusive=lambda call: (
            session.classify(call.input.name, call.input.arguments) == "exclusive"
        ),
        on_start=lambda call: trace.items.append(("start", call.input.call_id)),
        on_commit=on_commit,
    )


def inp(name: str, call_id: str, signal: Signal | None = None) -> ExecutionInput:
    return ExecutionInput(call_id=call_id, name=name, arguments={}, signal=signal or Signal())


def of(trace: Trace, kind: str) -> list[str]:
    return [name for k, name in trace.items if k == kind]


async def test_starts_and_commits_follow_submission_order_while_bodies_overlap():
    trace = Trace()
    session = Session(tools=[trace.tool("slow", seconds=0.2), trace.tool("fast")])
    s = scheduler(session, trace)
    for i, name in enumerate(["slow", "fast", "fast"]):
        s.submit(inp(name, f"c{i}"))
    s.seal()
    calls = await s.join()
    assert of(trace, "start") == of(trace, "commit") == ["c0", "c1", "c2"]
    assert trace.items.index(("end", "fast")) < trace.items.index(("end", "slow"))
    assert [c.state for c in calls] == [CallState.COMMITTED] * 3
    assert [c.result.value for c in calls] == ["slow", "fast", "fast"]


async def test_the_pool_bounds_how_many_run_at_once():
    trace = Trace()
    session = Session(tools=[trace.tool("t", seconds=0.05)])
    s = scheduler(session, trace, pool=2)
    for i in range(6):
        s.submit(inp("t", f"c{i}"))
    s.seal()
    await s.join()
    assert trace.peak == 2


async def test_an_exclusive_call_waits_for_earlier_commits_and_holds_the_barrier_until_its_own():
    trace = Trace()
    session = Session(tools=[trace.tool("safe", seconds=0.05), trace.tool("alone", safe=False)])
    s = scheduler(session, trace)
    for i, name in enumerate(["safe", "safe", "alone", "safe"]):
        s.submit(inp(name, f"c{i}"))
    s.seal()
    await s.join()
    items = trace.items
    assert items.index(("commit", "c1")) < items.index(("start", "c2"))
    assert items.index(("commit", "c2")) < items.index(("start", "c3"))


async def test_a_slow_policy_stage_delays_the_next_start():
    trace = Trace()
    session = Session(tools=[trace.tool("t")])

    async def slow_first(execution, next):
        if execution.call_id == "c0":
            await asyncio.sleep(0.1)
            trace.items.append(("policy done", "c0"))
        return await next()

    session.on("tools/pre-execute", slow_first)
    s = scheduler(session, trace)
    s.submit(inp("t", "c0"))
    s.submit(inp("t", "c1"))
    s.seal()
    await s.join()
    assert trace.items.index(("policy done", "c0")) < trace.items.index(("start", "c1"))


async def test_a_malformed_input_is_answered_not_run():
    trace = Trace()
    session = Session(tools=[trace.tool("t")])
    s = scheduler(session, trace)
    bad = s.submit(inp("", "c0"))
    good = s.submit(inp("t", "c1"))
    s.seal()
    await s.join()
    assert bad.pending is None and bad.result.error.message == "name must be a non-empty string"
    assert good.result.value == "t" and of(trace, "commit") == ["c0", "c1"]


async def test_drain_drops_what_did_not_start_and_abandons_what_is_stuck():
    trace = Trace()
    finalized, published = [], []
    stubborn = trace.tool("stubborn", seconds=1.0, stubborn=True)
    stubborn = make_tool(
        "stubborn",
        stubborn.execute,
        is_concurrency_safe=lambda a: True,
        finalize_content=lambda e, r: finalized.append(r.error.code),
    )
    session = Session(tools=[stubborn, trace.tool("t", safe=False)])
    session.on(
        "tools/result",
        lambda e, r: published.append((e.call_id, r.error.code if r.is_error else None)),
    )
    s = scheduler(session, trace)
    run = Signal()
    stuck = s.submit(inp("stubborn", "c0", Signal.any(run)))
    queued = s.submit(inp("t", "c1", Signal.any(run)))  # exclusive: waits behind c0
    await asyncio.sleep(0.05)
    assert (stuck.state, queued.state) == (CallState.DISPATCHING, CallState.QUEUED)
    run.abort("settled")
    hanging = await s.drain(
        abandon_after_s=0.1, abandon_error=lambda: OutcomeUnknownError("gave up")
    )
    assert hanging == []
    assert queued.state is CallState.DROPPED and queued.result.error.code == "ABORTED"
    assert stuck.state is CallState.COMMITTED and stuck.result.error.code == "TOOL_OUTCOME_UNKNOWN"
    assert of(trace, "start") == of(trace, "commit") == ["c0"]
    assert finalized == ["TOOL_OUTCOME_UNKNOWN"] and published == [("c0", "TOOL_OUTCOME_UNKNOWN")]
    with pytest.raises(RuntimeError):
        s.submit(inp("t", "c2"))


async def test_a_call_that_only_waited_its_turn_is_committed_as_it_stands():
    trace = Trace()
    session = Session(tools=[trace.tool("stubborn", seconds=1.0, stubborn=True), trace.tool("t")])
    s = scheduler(session, trace)
    s.submit(inp("stubborn", "c0"))
    quick = s.submit(inp("t", "c1"))
    await asyncio.sleep(0.05)
    assert quick.state is CallState.WAITING  # done, behind c0's commit
    await s.drain(abandon_after_s=0.1, abandon_error=lambda: OutcomeUnknownError("gave up"))
    assert quick.result.value == "t"
    assert of(trace, "commit") == ["c0", "c1"]


async def test_an_owner_failure_stops_the_scheduler_and_join_raises_it():
    trace = Trace()
    session = Session(tools=[trace.tool("t", safe=False)])

    def on_start(call):
        if call.input.call_id == "c1":
            raise RuntimeError("log refused")
        trace.items.append(("start", call.input.call_id))

    async def on_commit(call):
        trace.items.append(("commit", call.input.call_id))

    s = Scheduler(
        session.prepare, pool=4, exclusive=lambda call: True, on_start=on_start, on_commit=on_commit
    )
    calls = [s.submit(inp("t", f"c{i}")) for i in range(3)]
    s.seal()
    with pytest.raises(RuntimeError, match="log refused"):
        await s.join()
    assert [c.state for c in calls] == [CallState.COMMITTED, CallState.STARTING, CallState.DROPPED]
    assert of(trace, "commit") == ["c0"]


def test_the_pool_must_hold_at_least_one_call():
    with pytest.raises(ValueError):
        Scheduler(
            Session().prepare,
            pool=0,
            exclusive=lambda c: True,
            on_start=lambda c: None,
            on_commit=lambda c: None,
        )


async def test_start_takes_a_call_that_never_waits_to_its_commit_before_it_returns():
    trace = Trace()
    session = Session(tools=[trace.tool("t")])
    s = scheduler(session, trace)
    held = s.submit(inp("t", "c0"), start=False)
    await asyncio.sleep(0)                      # a turn of the loop starts nothing held back
    assert held.state is CallState.QUEUED and trace.items == []
    s.start()
    assert held.done.done() and held.state is CallState.COMMITTED   # no await in between
    assert trace.items == [("start", "c0"), ("body", "t"), ("end", "t"), ("commit", "c0")]
    again = s.submit(inp("t", "c1"), start=False)                   # the lane drives again
    s.start()
    assert again.state is CallState.COMMITTED and held.result.value == again.result.value == "t"


async def test_calls_started_together_keep_their_order_and_overlap():
    trace = Trace()
    session = Session(tools=[trace.tool("slow", seconds=0.05), trace.tool("fast")])
    s = scheduler(session, trace)
    calls = [s.submit(inp(name, f"c{i}"), start=False)
             for i, name in enumerate(["slow", "fast", "fast"])]
    s.start()
    s.seal()
    await s.join()
    assert of(trace, "start") == of(trace, "commit") == ["c0", "c1", "c2"]
    assert trace.items.index(("start", "c2")) < trace.items.index(("body", "slow"))
    assert [c.state for c in calls] == [CallState.COMMITTED] * 3


async def test_a_batch_of_one_waiting_call_takes_a_handful_of_turns_after_its_body():
    """A body that waits: once it resumes, its commit and `join` follow within three turns
    of the loop (its dispatch runs in the call's own task; the join is woken by the call
    that settles last, not through `asyncio.wait`'s done callbacks)."""
    gate, s, _ = _one_gated_call()
    call = s.submit(inp("t", "c0"), start=False)
    s.seal()
    s.start()
    joined = asyncio.ensure_future(s.join())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert await _turns_to_commit(gate, joined, call) <= 3


async def _nothing() -> None:
    return None


async def _turns_to_commit(gate: asyncio.Future[None], waiting: Awaitable[list[Scheduled]],
                           call: Scheduled) -> int:
    """The loop turns from opening `gate` (`_one_gated_call`) until `waiting` returns
    `[call]`, committed with the body's "ok"."""
    counter = Turns()
    gate.set_result(None)
    assert await waiting == [call]
    counter.stop()
    assert call.state is CallState.COMMITTED and call.result.value == "ok"
    return counter.count


def _one_gated_call() -> tuple[asyncio.Future[None], Scheduler, list[asyncio.Task | None]]:
    """A scheduler that never abandons, for a tool `t` whose body waits for the returned
    gate; the list gets the task each body call runs in."""
    gate = asyncio.get_running_loop().create_future()
    tasks: list[asyncio.Task | None] = []

    async def body(args, ctx):
        tasks.append(asyncio.current_task())
        await gate
        return "ok"

    session = Session(tools=[make_tool("t", body)])
    s = Scheduler(session.prepare, pool=1, exclusive=lambda c: True,
                  on_start=lambda c: None, on_commit=lambda c: _nothing(), abandons=False)
    return gate, s, tasks


async def test_a_scheduler_made_not_to_abandon_refuses_drain():
    session = Session(tools=[make_tool("t", lambda args, ctx: "ok")])
    s = Scheduler(session.prepare, pool=1, exclusive=lambda c: True,
                  on_start=lambda c: None, on_commit=lambda c: _nothing(), abandons=False)
    with pytest.raises(RuntimeError, match="abandons=False"):
        await s.drain(abandon_after_s=0.1, abandon_error=lambda: OutcomeUnknownError("x"))


async def test_a_cancelled_join_leaves_the_calls_and_other_joins_alone():
    trace = Trace()
    session = Session(tools=[trace.tool("slow", seconds=0.05)])
    s = scheduler(session, trace)
    call = s.submit(inp("slow", "c0"))
    s.seal()
    first, second = asyncio.ensure_future(s.join()), asyncio.ensure_future(s.join())
    await asyncio.sleep(0.01)
    first.cancel()
    assert await second == [call]
    assert first.cancelled() and call.state is CallState.COMMITTED
    assert not call.done.cancelled()


async def test_a_scheduler_given_its_loop_never_looks_the_running_loop_up(monkeypatch):
    """`loop=`: the calls' futures are made on the owner's loop, and submitting and
    starting a call that commits at once asks asyncio for no running loop (a `getpid`
    system call each time in CPython 3.11)."""
    loop = asyncio.get_running_loop()
    trace = Trace()
    session = Session(tools=[make_tool("t", lambda args, ctx: "ok")])
    s = Scheduler(session.prepare, pool=1, exclusive=lambda c: False,
                  on_start=lambda c: None, on_commit=lambda c: _nothing(), loop=loop)

    def looked_up() -> asyncio.AbstractEventLoop:
        trace.items.append(("looked up", "loop"))
        return loop

    monkeypatch.setattr(asyncio, "get_running_loop", looked_up)
    call = s.submit(inp("t", "c0"), start=False)
    s.start()
    monkeypatch.undo()
    assert call.state is CallState.COMMITTED and call.result.value == "ok"
    assert call.done.get_loop() is loop and call.done.done()
    assert trace.items == []


async def test_without_a_loop_a_scheduler_uses_the_one_running_at_each_submit():
    session = Session(tools=[make_tool("t", lambda args, ctx: "ok")])
    s = Scheduler(session.prepare, pool=1, exclusive=lambda c: False,
                  on_start=lambda c: None, on_commit=lambda c: _nothing())
    call = s.submit(inp("t", "c0"))
    s.seal()
    assert await s.join() == [call]
    assert call.done.get_loop() is asyncio.get_running_loop()
    assert call.state is CallState.COMMITTED


async def test_an_owner_failure_at_the_start_of_a_lone_call_still_ends_join():
    """A call whose `on_start` raises settles in its first step (no task, no future): `join`
    raises the failure, not waits for ever."""
    session = Session(tools=[make_tool("t", lambda args, ctx: "ok")])

    def on_start(call):
        raise RuntimeError("log refused")

    s = Scheduler(session.prepare, pool=1, exclusive=lambda c: False, on_start=on_start,
                  on_commit=lambda c: _nothing(), loop=asyncio.get_running_loop())
    call = s.submit(inp("t", "c0"), start=False)
    s.seal()
    s.start()
    assert call.done.done()
    with pytest.raises(RuntimeError, match="log refused"):
        await asyncio.wait_for(s.join(), 5)


async def test_run_takes_the_last_call_of_a_batch_in_the_awaiting_task():
    """`run` (abandons=False): the lane and its last call run in the caller's task; a
    call that waits resumes there, and `run` returns in that same turn of the loop."""
    gate, s, tasks = _one_gated_call()
    call = s.submit(inp("t", "c0"), start=False)
    running = asyncio.ensure_future(s.run())
    for _ in range(3):
        await asyncio.sleep(0)
    assert tasks == [running] and call.state is CallState.DISPATCHING
    assert await _turns_to_commit(gate, running, call) <= 2
