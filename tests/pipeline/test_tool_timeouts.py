"""A tool's declared `timeout_ms` is enforced by the pipeline itself, without any wrapper: an
async body is cancelled at its deadline (`TOOL_TIMEOUT`), a sync body that cannot be stopped
in its worker thread is reported `TOOL_OUTCOME_UNKNOWN` at the deadline, not awaited
(pipeline/_deadline.py, docs/pipeline.md "Timeouts")."""

from __future__ import annotations

import asyncio
import threading

import pytest

from codemode.pipeline import (
    RunContext,
    Session,
    ToolTimeoutError,
    events,
    retry_wrapper,
    timeout_wrapper,
    tool,
)
from codemode.pipeline.log import load

from conftest import make_tool

# Budgets are short: a body that ignores its deadline blocks on an event the test sets only
# after the call came back, so no outcome depends on how fast the machine is.
BUDGET_MS = 50


def results(path):
    return [e for e in load(path) if isinstance(e, events.ToolResult)]


async def test_an_async_body_that_ignores_its_signal_is_cancelled_at_the_deadline(tmp_path):
    seen = []

    @tool(timeout_ms=BUDGET_MS)
    async def hangs() -> str:
        try:
            await asyncio.Event().wait()          # never set, and ctx.signal not watched
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "finished"

    log = tmp_path / "s.jsonl"
    session = Session(tools=[hangs], log=str(log))
    result = await session.call("hangs")
    session.close()
    assert (result.error.code, result.error.message) == (
        "TOOL_TIMEOUT", f"tool call timed out after {BUDGET_MS}ms")
    assert seen == ["cancelled"]
    [logged] = results(log)
    assert logged.is_error and logged.error.code == "TOOL_TIMEOUT"


async def test_the_body_s_signal_holds_the_timeout_when_it_is_cancelled():
    reasons = []

    async def watches(args, ctx: RunContext):
        try:
            await ctx.signal.wait()
        finally:                                  # what it handed the signal to stops too
            reasons.append(ctx.signal.reason)
        return "stopped"

    session = Session(tools=[make_tool("watches", watches, timeout_ms=BUDGET_MS)])
    result = await session.call("watches")
    assert result.error.code == "TOOL_TIMEOUT"
    [reason] = reasons
    assert isinstance(reason, ToolTimeoutError)
    assert reason.message == f"tool call timed out after {BUDGET_MS}ms"


async def test_a_sync_body_in_its_thread_is_outcome_unknown_at_the_deadline_not_awaited(
        tmp_path):
    release, finished = threading.Event(), threading.Event()

    @tool(timeout_ms=BUDGET_MS)
    def blocks() -> str:
        release.wait(60)                          # a thread cannot be interrupted
        finished.set()
        return "late"

    log = tmp_path / "s.jsonl"
    session = Session(tools=[blocks], log=str(log))
    result = await session.call("blocks")
    assert not finished.is_set()                  # answered while the thread still runs
    release.set()
    assert await asyncio.to_thread(finished.wait, 60)
    session.close()
    assert result.error.code == "TOOL_OUTCOME_UNKNOWN"
    assert result.error.message == (
        f"tool call timed out after {BUDGET_MS}ms; its body still runs in a worker thread, "
        "which cannot be stopped: whether it takes effect is unknown")
    [logged] = results(log)
    assert logged.error.code == "TOOL_OUTCOME_UNKNOWN"


@pytest.mark.slow                                 # waits out the grace of a cancelled body
async def test_an_async_body_that_swallows_the_cancellation_is_left_running():
    release, ended = asyncio.Event(), asyncio.Event()

    async def stubborn(args, ctx):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()                  # catches the cancellation and goes on
        ended.set()
        return "done anyway"

    session = Session(tools=[make_tool("stubborn", stubborn, timeout_ms=BUDGET_MS)])
    result = await session.call("stubborn")
    assert not ended.is_set()
    assert result.error.code == "TOOL_OUTCOME_UNKNOWN"
    assert result.error.message.endswith(
        "its body did not stop when cancelled: whether it takes effect is unknown")
    release.set()
    await asyncio.wait_for(ended.wait(), 60)


async def test_a_body_within_its_budget_and_a_body_on_the_loop_are_untouched():
    @tool(timeout_ms=60_000)
    async def quick(x: int) -> int:
        return x + 1

    @tool(timeout_ms=1, blocking=False)
    def on_the_loop() -> str:                     # done before any timer could fire
        return "inline"

    session = Session(tools=[quick, on_the_loop])
    assert (await session.call("quick", {"x": 1})).value == 2
    assert (await session.call("on_the_loop")).value == "inline"


@pytest.mark.parametrize("blocking", [True, False], ids=["thread", "async"])
async def test_a_hand_installed_timeout_wrapper_keeps_one_outcome(tmp_path, blocking):
    release = threading.Event()

    @tool(name="slow", timeout_ms=BUDGET_MS)
    def in_thread() -> str:
        release.wait(60)
        return "late"

    @tool(name="slow", timeout_ms=BUDGET_MS)
    async def ignores() -> str:
        await asyncio.Event().wait()
        return "late"

    attempts = []
    log = tmp_path / "s.jsonl"
    session = Session(tools=[in_thread if blocking else ignores], log=str(log))
    session.on("tools/execute", timeout_wrapper)
    session.on("tools/execute", retry_wrapper(max_attempts=3))
    session.on("tools/execute", lambda execution, next: attempts.append(1) or next())
    result = await session.call("slow")
    release.set()
    session.close()
    expected = "TOOL_OUTCOME_UNKNOWN" if blocking else "TOOL_TIMEOUT"
    assert result.error.code == expected and attempts == [1]     # not retried, not replaced
    assert [e.error.code for e in results(log)] == [expected]
