"""The log invariants (docs/pipeline-spec.md §10): `check` over a whole log, the appends an open log
refuses, reading a log without opening it for writing."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from codemode.pipeline import LogInvariantError, Session, open_log
from codemode.pipeline.events import (
    CodeApprovalUsed,
    CodeDispatch,
    CodeDispatchStart,
    ErrorInfo,
    MessageSource,
    StepEnd,
    StepStart,
    ToolCall,
    ToolResult,
    ToolResultBlock,
    ToolResultMessage,
    TurnEnd,
    TurnStart,
)
from codemode.pipeline.log import REFUSED, Violation, ViolationKind, check, load

from conftest import make_tool

K = ViolationKind


def numbered(*events):
    return [msgspec.structs.replace(e, seq=i) for i, e in enumerate(events, start=1)]


def call(call_id="c1", step=1, turn=1):
    return ToolCall(turn=turn, step=step, call_id=call_id, name="echo", arguments="{}")


def result(call_id="c1", step=1, turn=1, code=None):
    return ToolResult(
        turn=turn,
        step=step,
        message=ToolResultMessage(
            id=f"msg_{call_id}",
            source=MessageSource(kind="tool", call_id=call_id),
            content=(ToolResultBlock(tool_call_id=call_id, content=(), is_error=code is not None),),
        ),
        error=ErrorInfo(name="X", code=code) if code else msgspec.UNSET,
    )


def start(sub="c1:code:1", root="c1", parent="c1", name="echo"):
    return CodeDispatchStart(
        root_call_id=root, parent_call_id=parent, sub_call_id=sub, name=name, arguments={}
    )


def settle(sub="c1:code:1", root="c1", parent="c1", name="echo"):
    return CodeDispatch(
        root_call_id=root,
        parent_call_id=parent,
        sub_call_id=sub,
        name=name,
        arguments={},
        is_error=False,
        content=(),
    )


def used(root="c1", parent="c1", approval="a1"):
    return CodeApprovalUsed(root_call_id=root, parent_call_id=parent, approval_id=approval,
                            approval_seal="s", seal="s")


OPEN = (TurnStart(turn=1), StepStart(turn=1, step=1))
CLOSE = (StepEnd(turn=1, step=1), TurnEnd(turn=1))


def kinds(events, complete=True):
    return [v.kind for v in check(numbered(*events), complete=complete)]


def test_a_sound_log_has_no_violations():
    assert kinds([*OPEN, call(), start(), settle(), result(), *CLOSE]) == []


@pytest.mark.parametrize(
    "events, expected",
    [
        ([TurnStart(turn=1), TurnStart(turn=2)], [K.TURN_ALREADY_OPEN, K.UNCLOSED_TURN]),
        ([TurnEnd(turn=1)], [K.NO_OPEN_TURN]),
        ([StepStart(turn=1, step=1)], [K.NO_OPEN_TURN]),
        ([*OPEN, StepStart(turn=1, step=1), *CLOSE], [K.STEP_ALREADY_OPEN]),
        ([TurnStart(turn=1), StepEnd(turn=1, step=1), TurnEnd(turn=1)], [K.NO_OPEN_STEP]),
        ([TurnStart(turn=1), call(), TurnEnd(turn=1)], [K.NO_OPEN_STEP]),
        ([*OPEN, call(), call(), result(), result(), *CLOSE], [K.DUPLICATE_CALL]),
        ([*OPEN, result("ghost"), *CLOSE], [K.RESULT_WITHOUT_CALL]),
        ([*OPEN, call(), result(), result(), *CLOSE], [K.RESULT_WITHOUT_CALL]),
        (
            [
                *OPEN,
                call("c1", step=1),
                StepEnd(turn=1, step=1),
                StepStart(turn=1, step=2),
                result("c1", step=2),
                StepEnd(turn=1, step=2),
                TurnEnd(turn=1),
            ],
            [K.UNANSWERED_CALL, K.RESULT_WITHOUT_CALL],
        ),
        ([*OPEN, call(), *CLOSE], [K.UNANSWERED_CALL]),
        ([*OPEN, call(""), result(""), *CLOSE], [K.EMPTY_ID, K.EMPTY_ID]),
        ([start(), settle()], [K.DISPATCH_OUTSIDE_TURN, K.DISPATCH_OUTSIDE_TURN]),
        ([*OPEN, start(sub=""), *CLOSE], [K.EMPTY_ID]),
        ([*OPEN, start(), start(), settle(), *CLOSE], [K.DUPLICATE_SUB_CALL]),
        ([*OPEN, settle(), *CLOSE], [K.SETTLE_WITHOUT_START]),
        ([*OPEN, start(), settle(), settle(), *CLOSE], [K.SETTLE_WITHOUT_START]),
        ([*OPEN, start(), settle(root="other", parent="other"), *CLOSE], [K.ROOT_CHANGED]),
        ([*OPEN, start(parent="c9"), settle(parent="c9"), *CLOSE], [K.UNKNOWN_PARENT]),
        ([*OPEN, start(), *CLOSE], [K.UNSETTLED_SUB_CALL]),
        ([*OPEN, call()], [K.UNCLOSED_TURN, K.UNCLOSED_STEP, K.UNANSWERED_CALL]),
        ([used()], [K.DISPATCH_OUTSIDE_TURN]),
        ([*OPEN, call(), used(approval=""), result(), *CLOSE], [K.EMPTY_ID]),
        ([*OPEN, call(), used(), result(), *CLOSE], []),
    ],
)
def test_each_invariant_is_reported(events, expected):
    assert kinds(events) == expected


def test_a_nested_parent_known_under_the_root_is_fine():
    inner = start(sub="c1:code:1:code:1", parent="c1:code:1")
    assert (
        kinds(
            [
                *OPEN,
                start(),
                inner,
                settle(sub="c1:code:1:code:1", parent="c1:code:1"),
                settle(),
                *CLOSE,
            ]
        )
        == []
    )


def test_crash_repair_may_answer_a_call_it_never_saw_only_as_not_started():
    assert kinds([*OPEN, result("c0", code="TOOL_NOT_STARTED"), *CLOSE]) == []
    assert kinds([*OPEN, result("c0", code="TOOL_OUTCOME_UNKNOWN"), *CLOSE]) == [
        K.RESULT_WITHOUT_CALL
    ]


def test_overlapping_steps_of_one_turn_are_fine():
    events = [
        TurnStart(turn=1),
        StepStart(turn=1, step=1),
        call("a", step=1),
        StepStart(turn=1, step=2),
        call("b", step=2),
        result("b", step=2),
        StepEnd(turn=1, step=2),
        result("a", step=1),
        StepEnd(turn=1, step=1),
        TurnEnd(turn=1),
    ]
    assert kinds(events) == []


def test_seq_must_count_up_by_one():
    events = numbered(*OPEN, *CLOSE)
    events[2] = msgspec.structs.replace(events[2], seq=7)
    assert [v.kind for v in check(events)] == [K.SEQ_OUT_OF_ORDER, K.SEQ_OUT_OF_ORDER]


def test_a_partial_log_may_end_open():
    assert kinds([*OPEN, call(), start()], complete=False) == []
    [violation, *_] = check(numbered(*OPEN, call()))
    assert violation == Violation(
        kind=K.UNCLOSED_TURN, seq=1, message="the log ends with turn 1 open"
    )


# ---- what an open log refuses -----------------------------------------------------------


@pytest.mark.parametrize("backend", ["memory", "session.jsonl", "session.db"])
@pytest.mark.parametrize(
    "bad, kind",
    [
        (result("ghost"), K.RESULT_WITHOUT_CALL),
        (start(sub=""), K.EMPTY_ID),
        (settle(), K.SETTLE_WITHOUT_START),
        (start(parent="c9"), K.UNKNOWN_PARENT),
    ],
)
def test_an_open_log_refuses_what_no_writer_may_write(tmp_path, backend, bad, kind):
    assert kind in REFUSED
    with open_log(None if backend == "memory" else tmp_path / backend) as log:
        for event in OPEN:
            log.append(event)
        with pytest.raises(LogInvariantError) as caught:
            log.append(bad)
        assert caught.value.code == "LOG_INVARIANT"
        assert caught.value.violation.kind == kind
        assert [e.seq for e in log.read()] == [1, 2]  # nothing written
        for event in CLOSE:
            log.append(event)
        assert check(log.read()) == []


def test_dispatch_events_outside_a_turn_are_refused():
    with open_log(None) as log:
        with pytest.raises(LogInvariantError, match="outside an open turn"):
            log.append(start())
        assert log.read() == []


@pytest.mark.log_unchecked("a log written before the invariants were enforced")
def test_a_log_holding_old_violations_still_opens_and_is_repaired(tmp_path):
    path = tmp_path / "old.jsonl"
    lines = numbered(start(), settle(), TurnStart(turn=1), StepStart(turn=1, step=1), call())
    path.write_bytes(b"".join(msgspec.json.encode(e) + b"\n" for e in lines))
    with open_log(path) as log:
        assert [type(e).__name__ for e in log.repaired] == ["ToolResult", "StepEnd", "TurnEnd"]
        assert [v.kind for v in check(log.read())] == [
            K.DISPATCH_OUTSIDE_TURN,
            K.DISPATCH_OUTSIDE_TURN,
        ]


# ---- reading without writing ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["session.jsonl", "session.db"])
def test_load_reads_a_log_that_is_open_for_writing(tmp_path, name):
    with open_log(tmp_path / name) as log:
        for event in OPEN:
            log.append(event)
        assert [type(e).__name__ for e in load(tmp_path / name)] == ["TurnStart", "StepStart"]
        for event in CLOSE:
            log.append(event)
    assert len(load(tmp_path / name)) == 4


def test_load_leaves_out_a_line_still_being_written(tmp_path):
    path = tmp_path / "s.jsonl"
    with open_log(path) as log:
        log.append(TurnStart(turn=1))
        log.append(TurnEnd(turn=1))
    with open(path, "ab") as f:
        f.write(b'{"type":"turn/sta')
    assert [e.seq for e in load(path)] == [1, 2]


# ---- the pipeline's own logs keep the invariants ---------------------------------------------


async def test_concurrent_calls_on_one_session_share_one_turn(tmp_path):
    async def slow(args, ctx):
        await asyncio.sleep(args["s"])
        ctx.defer_context(f"after {args['s']}")
        return args["s"]

    with Session(tools=[make_tool("slow", slow)], log=tmp_path / "s.jsonl") as session:
        results = await asyncio.gather(
            *(session.call("slow", {"s": s}) for s in (0.05, 0.01, 0.03))
        )
        assert [r.value for r in results] == [0.05, 0.01, 0.03]
        log = session.log.read()
    assert check(log) == []
    assert [type(e).__name__ for e in log].count("TurnStart") == 1
    kinds_ = [type(e).__name__ for e in log]
    last_step_end = max(i for i, k in enumerate(kinds_) if k == "StepEnd")
    assert all(i > last_step_end for i, k in enumerate(kinds_) if k == "UserMessage")


def test_an_event_of_a_subclass_is_checked_as_its_kind():
    """The checks branch on the kind of event before `isinstance` (a cache by class): an
    event of a subclass of a checked kind is still checked, and refused, as that kind."""
    from codemode.pipeline import events
    from codemode.pipeline.log import check

    class LateResult(events.ToolResult, tag="test/late-result", frozen=True):
        pass

    result = LateResult(seq=3, time=0.0, turn=1, step=1, message=events.ToolResultMessage(
        id="m", source=events.MessageSource(kind="tool", call_id="nobody"),
        content=(events.ToolResultBlock(tool_call_id="nobody", content=(), is_error=False),)),
        source_event_seqs=())
    log = [events.TurnStart(seq=1, time=0.0, turn=1),
           events.StepStart(seq=2, time=0.0, turn=1, step=1), result]
    assert [v.kind.value for v in check(log, complete=False)] == ["RESULT_WITHOUT_CALL"]
