"""Batches: scheduling, model-order commits, contexts delivery (docs/pipeline-spec.md S0, S1,
S15–S17,
§8.2)."""

import asyncio

import pytest

from codemode.pipeline import Session, Signal, tool
from codemode.pipeline.events import (
    InboxQueued,
    StepStart,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)

from conftest import make_tool


def tracked(name, *, safe, delay=0.0, active=None, peak=None, contexts=(), value=None):
    async def body(args, ctx):
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        try:
            for c in contexts:
                ctx.defer_context(c)
            await asyncio.sleep(args.get("delay", delay) if isinstance(args, dict) else delay)
            return value if value is not None else name
        finally:
            active[0] -= 1

    return make_tool(name, body, is_concurrency_safe=(lambda args: True) if safe else None)


def kinds(events):
    """Event kinds, without the log-only inbox bookkeeping."""
    return [type(e).__name__ for e in events if not isinstance(e, InboxQueued)]


async def test_safe_calls_overlap_up_to_the_cap_and_results_keep_model_order(log_path):
    active, peak = [0], [0]
    session = Session(tools=[tracked("read", safe=True, active=active, peak=peak)], log=log_path,
                      max_parallel_tool_calls=2)
    calls = [("read", {"delay": d}, f"c{i}") for i, d in enumerate([0.5, 0.01, 0.03, 0.0])]
    results = await session.call_batch(calls)
    assert [r.value for r in results] == ["read"] * 4
    assert peak[0] == 2
    events = session.log.read()
    assert [e.call_id for e in events if isinstance(e, ToolResult)] == ["c0", "c1", "c2", "c3"]
    # with a pool, a later call's tool/call may precede an earlier call's tool/result
    assert kinds(events)[:4] == ["TurnStart", "StepStart", "ToolCall", "ToolCall"]
    session.close()


async def test_an_exclusive_call_runs_alone_and_is_a_barrier():
    active, peak = [0], [0]
    session = Session(tools=[tracked("read", safe=True, active=active, peak=peak, delay=0.3),
                             tracked("write", safe=False, active=active, peak=peak, delay=0.02)])
    overlaps = []

    async def watch(execution, next):
        overlaps.append((execution.name, active[0]))
        return await next()

    session.on("tools/execute", watch)
    await session.call_batch([("read", {}), ("read", {}), ("write", {}), ("read", {})])
    assert overlaps == [("read", 0), ("read", 1), ("write", 0), ("read", 0)]


async def test_classification_needs_exactly_true():
    session = Session(tools=[
        make_tool("a", is_concurrency_safe=lambda args: 1),
        make_tool("b", is_concurrency_safe=lambda args: 1 / 0),
        make_tool("c", is_concurrency_safe=lambda args: True),
        make_tool("d"),
    ])
    assert [session.classify(n, {}) for n in "abcd"] + [session.classify("ghost", {})] == [
        "exclusive", "exclusive", "parallel", "exclusive", "exclusive"]


async def test_policy_stages_run_one_call_at_a_time_in_model_order(log_path):
    session = Session(tools=[make_tool("t", is_concurrency_safe=lambda a: True)], log=log_path)
    order = []

    async def slow_policy(execution, next):
        order.append(f"pre {execution.call_id}")
        if execution.call_id == "c1":
            await asyncio.sleep(0.02)
        return await next()

    session.on("tools/pre-execute", slow_policy)
    await session.call_batch([("t", {}, "c1"), ("t", {}, "c2")])
    events = session.log.read()
    first_result = next(i for i, e in enumerate(events) if isinstance(e, ToolResult))
    second_call = [i for i, e in enumerate(events) if isinstance(e, ToolCall)][1]
    assert order == ["pre c1", "pre c2"]
    assert second_call < first_result
    session.close()


async def test_contexts_from_two_parallel_calls_appear_only_after_both_results_in_model_order(
    log_path,
):
    active, peak = [0], [0]
    slow = tracked(
        "slow", safe=True, active=active, peak=peak, delay=0.03, contexts=["slow-1", "slow-2"]
    )
    fast = tracked("fast", safe=True, active=active, peak=peak, delay=0.0, contexts=["fast-1"])
    session = Session(tools=[slow, fast], log=log_path)
    await session.call_batch([("slow", {}, "a"), ("fast", {}, "b")])
    events = session.log.read()
    assert kinds(events) == [
        "TurnStart",
        "StepStart",
        "ToolCall",
        "ToolCall",
        "ToolResult",
        "ToolResult",
        "StepEnd",
        "UserMessage",
        "UserMessage",
        "UserMessage",
        "TurnEnd",
    ]
    messages = [e.message for e in events if isinstance(e, UserMessage)]
    assert [m.content for m in messages] == [
        ({"type": "text", "text": t},) for t in ("slow-1", "slow-2", "fast-1")
    ]
    assert [m.source.call_id for m in messages] == ["a", "a", "b"]
    result_seqs = {e.call_id: e.seq for e in events if isinstance(e, ToolResult)}
    assert [e.source_event_seqs for e in events if isinstance(e, UserMessage)] == [
        (result_seqs["a"],), (result_seqs["a"],), (result_seqs["b"],)]
    assert {m.source.kind for m in messages} == {"context"}
    session.close()


async def test_turn_cancellation_balances_every_call_including_unstarted_ones(log_path):
    started = asyncio.Event()

    async def hang(args, ctx):
        started.set()
        await ctx.signal.wait()
        return "interrupted"

    session = Session(tools=[make_tool("hang", hang), make_tool("t")], log=log_path)
    signal = Signal()
    task = asyncio.ensure_future(
        session.call_batch([("hang", {}, "c1"), ("t", {}, "c2"), ("t", {}, "c3")], signal=signal)
    )
    await started.wait()
    signal.abort()
    results = await task
    assert [r.error.code for r in results] == [
        "ABORTED",
        "ABORTED_BEFORE_DISPATCH",
        "ABORTED_BEFORE_DISPATCH",
    ]
    events = session.log.read()
    calls = [e.call_id for e in events if isinstance(e, ToolCall)]
    settled = [e.call_id for e in events if isinstance(e, ToolResult)]
    assert calls == settled == ["c1", "c2", "c3"]
    assert [e.error.code for e in events if isinstance(e, ToolResult)] == [
        "ABORTED", "ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH"]
    assert events[-1] == TurnEnd(
        turn=1, reason="cancelled", seq=events[-1].seq, time=events[-1].time
    )
    session.close()


async def test_cancelling_the_batch_task_still_commits_every_result(log_path):
    started = asyncio.Event()

    async def hang(args, ctx):
        started.set()
        await ctx.signal.wait()
        return "x"

    session = Session(tools=[make_tool("hang", hang)], log=log_path)
    task = asyncio.ensure_future(session.call_batch([("hang", {}, "c1"), ("hang", {}, "c2")]))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    events = session.log.read()
    assert [e.call_id for e in events if isinstance(e, ToolResult)] == ["c1", "c2"]
    session.close()


async def test_every_tool_call_has_exactly_one_tool_result_after_crash_recovery(log_path):
    with Session(tools=[make_tool("t")], log=log_path) as session:
        await session.call("t", {})
        session.begin_turn()
        session.log.append(StepStart(turn=2, step=1))
        session.log.append(ToolCall(turn=2, step=1, call_id="lost", name="t", arguments="{}"))
    with Session(log=log_path) as session:
        events = session.log.read()
    calls = [e.call_id for e in events if isinstance(e, ToolCall)]
    results = [e.call_id for e in events if isinstance(e, ToolResult)]
    assert sorted(calls) == sorted(results) and len(results) == len(set(results)) == 2
    assert [e.error.code for e in events if isinstance(e, ToolResult) and e.call_id == "lost"] == [
        "TOOL_OUTCOME_UNKNOWN"
    ]


async def test_a_concluding_result_ends_the_turn_after_the_batch():
    async def finish(args, ctx):
        ctx.conclude_turn()
        return "done"

    session = Session(tools=[make_tool("finish", finish), make_tool("t")])
    await session.call_batch([("finish", {}), ("t", {})])
    assert session.turn_concluded is True
    assert session.log.read()[-1].reason == "concluded"


async def test_a_failure_never_concludes_the_turn():
    async def finish(args, ctx):
        ctx.conclude_turn()
        raise RuntimeError("nope")

    session = Session(tools=[make_tool("finish", finish)])
    result = await session.call("finish", {})
    assert result.concludes_turn is False and session.log.read()[-1].reason == "completed"


async def test_an_explicit_turn_holds_several_steps_and_injected_messages():
    session = Session(tools=[make_tool("t")])
    async with session.turn() as turn:
        await session.call("t", {})
        session.inject("plugin note")
        await session.call("t", {})
    events = session.log.read()
    assert turn == 1
    assert kinds(events) == [
        "TurnStart",
        "StepStart",
        "ToolCall",
        "ToolResult",
        "StepEnd",
        "StepStart",
        "ToolCall",
        "ToolResult",
        "StepEnd",
        "UserMessage",
        "TurnEnd",
    ]
    assert [e.step for e in events if isinstance(e, StepStart)] == [1, 2]
    assert [e.message.source.kind for e in events if isinstance(e, UserMessage)] == ["inject"]


async def test_meta_and_error_info_are_persisted_on_tool_result(log_path):
    @tool(presentation_meta=lambda args, value: {"n": value})
    def number() -> int:
        return 3

    with Session(tools=[number], log=log_path) as session:
        await session.call("number", {})
        await session.call("ghost", {})
    with Session(log=log_path) as session:
        ok, bad = [e for e in session.log.read() if isinstance(e, ToolResult)]
    assert ok.meta == {"n": 3} and ok.error is msgspec_unset()
    assert (bad.error.name, bad.error.code) == ("UnknownToolError", "UNKNOWN_TOOL")


def msgspec_unset():
    import msgspec

    return msgspec.UNSET


async def test_a_call_with_an_empty_name_still_gets_a_failed_result(log_path):
    with Session(tools=[make_tool("t")], log=log_path) as session:
        results = await session.call_batch([("", {}, "c1"), ("t", {}, "c2")])
        events = session.log.read()
    assert results[0].content == (
        {"type": "text", "text": "Error: name must be a non-empty string"},
    )
    assert results[1].is_error is False
    assert [e.call_id for e in events if isinstance(e, ToolResult)] == ["c1", "c2"]


async def test_each_queued_context_is_logged_when_queued_and_delivered_with_the_same_id():
    async def body(args, ctx):
        ctx.defer_context("remember this")
        return "ok"

    session = Session(tools=[make_tool("t", body)])
    await session.call("t", {}, call_id="c1")
    events = session.log.read()
    [queued] = [e for e in events if isinstance(e, InboxQueued)]
    [delivered] = [e for e in events if isinstance(e, UserMessage)]
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.seq < queued.seq < delivered.seq
    assert queued.message == delivered.message and session.inbox == []


async def test_contexts_of_a_cancelled_batch_stay_pending_and_lead_the_next_turn(log_path):
    signal = Signal()

    async def body(args, ctx):
        ctx.defer_context("found while cancelling")
        signal.abort()
        raise RuntimeError("stopped")

    with Session(tools=[make_tool("t", body), make_tool("u")], log=log_path) as session:
        await session.call("t", {}, signal=signal)
        assert [m.content for m in session.inbox] == [
            ({"type": "text", "text": "found while cancelling"},)
        ]
        assert not any(isinstance(e, UserMessage) for e in session.log.read())
    with Session(tools=[make_tool("u")], log=log_path) as session:     # the inbox is durable
        assert len(session.inbox) == 1
        await session.call("u", {})
        events = session.log.read()
    second_turn = events[[i for i, e in enumerate(events) if isinstance(e, TurnStart)][1]:]
    assert kinds(second_turn)[:3] == ["TurnStart", "UserMessage", "StepStart"]


async def test_clear_inbox_drops_pending_messages():
    session = Session()
    session.inject("stale")
    session.clear_inbox()
    async with session.turn():
        pass
    assert not any(isinstance(e, UserMessage) for e in session.log.read())


async def test_concurrent_calls_of_a_tool_that_never_waits_share_one_implicit_turn():
    async def body(args, ctx):
        return "ok"

    session = Session(tools=[make_tool("t", body)])
    results = await asyncio.gather(session.call("t", {}), session.call("t", {}))
    assert [r.value for r in results] == ["ok", "ok"]
    events = session.log.read()
    assert kinds(events).count("TurnStart") == kinds(events).count("TurnEnd") == 1
    assert kinds(events)[:3] == ["TurnStart", "StepStart", "StepStart"]
