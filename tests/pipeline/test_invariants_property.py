"""Property: whatever listeners, wrappers, the body and the caller do, every call ends with
one frozen, lossless-JSON result, finalized once, published once, never a success after a
denial, and the log has exactly one tool/result per tool/call (docs/pipeline-spec.md §7)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.pipeline import (
    Accept,
    Allow,
    Ask,
    Block,
    CallResult,
    Deny,
    FrozenDict,
    Session,
    Signal,
    ToolDefinition,
)
from codemode.pipeline.events import ToolCall, ToolResult

PRE = st.sampled_from(["delegate", "allow", "deny", "ask", "throw", "abort", "junk"])
GUARD = st.sampled_from(["abstain", "deny", "throw"])
WRAP = st.sampled_from(
    [
        "delegate",
        "success",
        "failure",
        "throw",
        "abort-before",
        "abort-after",
        "aborted-signal",
        "junk",
    ]
)
BODY = st.sampled_from(["value", "non-json", "throw", "abort", "defer", "conclude", "bad-shape"])
POST = st.sampled_from(
    [
        "delegate",
        "accept",
        "content",
        "value",
        "bad-value",
        "both",
        "block",
        "throw",
        "abort",
        "junk",
    ]
)
FINAL = st.sampled_from(["none", "keep", "replace", "throw", "non-json"])
APPROVAL = st.sampled_from(
    ["unmounted", "allowed-once", "rejected", "cancelled", "unavailable", "raise", "rogue"]
)

SCENARIO = st.fixed_dictionaries({
    "pre": st.lists(PRE, max_size=3),
    "guards": st.lists(GUARD, max_size=2),
    "wrappers": st.lists(WRAP, max_size=2),
    "body": BODY,
    "post": st.lists(POST, max_size=2),
    "final": FINAL,
    "approval": APPROVAL,
    "agent": st.sampled_from([None, "main"]),
    "pre_aborted": st.booleans(),
    "bad_args": st.booleans(),
    "calls": st.integers(min_value=1, max_value=3),
})


def lossless(value: Any) -> bool:
    try:
        return msgspec.json.decode(msgspec.json.encode(value)) == value
    except Exception:
        return False


def check_frozen(result: CallResult) -> None:
    try:
        result.is_error = not result.is_error  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("result is mutable")
    assert isinstance(result.content, tuple)
    for block in result.content:
        assert isinstance(block, FrozenDict)
    if not result.is_error and isinstance(result.value, (dict, list)):
        try:
            result.value.clear()
        except TypeError:
            pass
        else:
            raise AssertionError("value is mutable")


async def run_scenario(s: dict[str, Any]) -> None:
    signal = Signal()
    if s["pre_aborted"]:
        signal.abort()
    trace: dict[str, Any] = {"denied": False, "finalized": 0, "body": 0, "pre_calls": 0}

    async def body(args: Any, ctx: Any) -> Any:
        trace["body"] += 1
        kind = s["body"]
        if kind == "non-json":
            return {"x": float("nan")}
        if kind == "throw":
            raise RuntimeError("body failed")
        if kind == "abort":
            signal.abort()
        if kind == "defer":
            ctx.defer_context("deferred")
        if kind == "conclude":
            ctx.conclude_turn()
        if kind == "bad-shape":
            return "not an object"
        return {"ok": True}

    def finalize(execution: Any, result: CallResult) -> Any:
        trace["finalized"] += 1
        kind = s["final"]
        if kind == "keep":
            return None
        if kind == "replace":
            return [{"type": "text", "text": "finalized"}]
        if kind == "throw":
            raise RuntimeError("finalizer failed")
        return [{"type": "text", "text": float("inf")}]

    defn = ToolDefinition(
        name="t", description="t", parameters={"type": "object"}, execute=body,
        output_schema={"type": "object"},
        finalize_content=None if s["final"] == "none" else finalize,
    )
    approval: Any = None if s["approval"] == "unmounted" else "ask"
    session = Session(tools=[defn], approval=approval)
    published: list[tuple[Any, CallResult]] = []
    session.on("tools/result", lambda e, r: published.append((e, r)))

    # runtime invariant checker: outermost at every point, records stages per execution
    stages: dict[int, list[str]] = {}

    def record(execution: Any, stage: str) -> None:
        stages.setdefault(id(execution.token), []).append(stage)

    async def pre_probe(execution: Any, next: Any) -> Any:
        record(execution, "pre")
        return await next()

    async def execute_probe(execution: Any, next: Any) -> Any:
        record(execution, "execute")
        return await next()

    async def post_probe(execution: Any, result: Any, next: Any) -> Any:
        record(execution, "post")
        return await next()

    session.on("tools/pre-execute", pre_probe)
    session.on("tools/execute", execute_probe)
    session.on("tools/post-execute", post_probe)
    session.on("tools/result", lambda e, r: record(e, "result"))

    if s["approval"] not in ("unmounted",):
        def answer(request: Any, next: Any) -> Any:
            if s["approval"] == "raise":
                raise RuntimeError("answerer down")
            if s["approval"] == "rogue":
                return "whenever"
            return s["approval"]

        session.on("approval/answer", answer)

    # the effective pre-execute decision is the outermost non-delegating listener's
    effective = None
    for kind in s["pre"]:
        if kind not in ("delegate", "abort"):
            effective = kind
            break
    for kind in s["pre"]:
        def pre(execution: Any, next: Any, kind: str = kind) -> Any:
            trace["pre_calls"] += 1
            if kind == "allow":
                return Allow()
            if kind == "deny":
                return Deny("pre denied")
            if kind == "ask":
                return Ask("please")
            if kind == "throw":
                raise RuntimeError("pre failed")
            if kind == "junk":
                return 42
            if kind == "abort":
                signal.abort()
            return next()

        session.on("tools/pre-execute", pre)

    for kind in s["guards"]:
        def guard(execution: Any, kind: str = kind) -> Any:
            if kind == "deny":
                trace["denied"] = True
                return "guard denied"
            if kind == "throw":
                raise RuntimeError("guard failed")
            return None

        session.guard(guard)

    for kind in s["wrappers"]:
        async def wrap(execution: Any, next: Any, kind: str = kind) -> Any:
            if kind == "success":
                return CallResult.success({"cached": True})
            if kind == "failure":
                return CallResult.failure("wrapper failed", code="WRAPPED")
            if kind == "throw":
                raise RuntimeError("wrapper failed")
            if kind == "abort-before":
                signal.abort()
            if kind == "aborted-signal":
                execution.signal = Signal.aborted_with()
            if kind == "junk":
                return "junk"
            result = await next()
            if kind == "abort-after":
                signal.abort()
            return result

        session.on("tools/execute", wrap)

    for kind in s["post"]:
        def post(execution: Any, result: CallResult, next: Any, kind: str = kind) -> Any:
            if kind == "accept":
                return Accept(additional_contexts=["post"])
            if kind == "content":
                return Accept(content="replaced")
            if kind == "value":
                return Accept(value={"replaced": True})
            if kind == "bad-value":
                return Accept(value=[1])
            if kind == "both":
                return Accept(content="c", value={})
            if kind == "block":
                return Block("blocked")
            if kind == "throw":
                raise RuntimeError("post failed")
            if kind == "junk":
                return None
            if kind == "abort":
                signal.abort()
            return next()

        session.on("tools/post-execute", post)

    arguments: Any = {"x": {1, 2}} if s["bad_args"] else {"x": 1}
    calls = [("t", arguments if i == 0 else {"i": i}, f"c{i}") for i in range(s["calls"])]
    async with session.turn():
        results = await session.call_batch(calls, agent=s["agent"], signal=signal)

    # one published, frozen, lossless result per call, and the same object returned
    assert len(results) == len(calls) == len(published)
    for (execution, published_result), result in zip(published, results, strict=True):
        assert published_result is result
        assert execution.call_id and execution.name == "t"
        check_frozen(result)
        assert lossless(list(result.content))
        assert lossless(result.meta)
        assert lossless(list(result.additional_contexts))
        if result.is_error:
            assert result.value is msgspec.UNSET and result.error is not None
            assert result.concludes_turn is False
        else:
            assert lossless(result.value) and result.error is None
    # per execution: pre at most once; execute only after pre; post only after pre or
    # execute, at most once; exactly one tools/result, last
    assert len(stages) == len(calls)
    for seen in stages.values():
        assert seen.count("pre") <= 1 and seen.count("execute") <= 1 and seen.count("post") <= 1
        assert seen.count("result") == 1 and seen[-1] == "result"
        if "execute" in seen:
            assert seen.index("pre") < seen.index("execute")
        if "post" in seen:
            assert "pre" in seen and seen.index("pre") < seen.index("post")
    # finalized exactly once per call that kept its finalizer
    if s["final"] != "none":
        assert trace["finalized"] == len(calls)
    # the pre-execute chain ran at most once per call
    assert trace["pre_calls"] <= len(s["pre"]) * len(calls)
    # never a success after a denial
    first = results[0]
    if effective == "deny" or trace["denied"]:
        assert all(r.is_error for r in results)
    if effective == "ask" and s["approval"] != "allowed-once":
        assert first.is_error
    if s["pre_aborted"]:
        assert all(r.is_error for r in results) and trace["body"] == 0
    # the log is balanced: one tool/result per tool/call
    events = session.log.read()
    call_ids = [e.call_id for e in events if isinstance(e, ToolCall)]
    result_ids = [e.call_id for e in events if isinstance(e, ToolResult)]
    assert call_ids == result_ids == [c[2] for c in calls]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SCENARIO)
def test_every_call_ends_with_one_frozen_lossless_result(scenario: dict[str, Any]) -> None:
    asyncio.run(run_scenario(scenario))
