"""`Stage` (pipeline/_eager.py): a stage's first step runs at once; its awaiter is woken
one turn of the loop after the stage ends, and cancelling the awaiter leaves the stage
running, as `asyncio.shield` would."""

from __future__ import annotations

import asyncio

import pytest

from codemode.pipeline._eager import Stage

from conftest import Turns


async def test_a_stage_that_does_not_wait_completes_at_once_without_a_task():
    steps: list[str] = []

    async def stage() -> str:
        steps.append("ran")
        return "value"

    made = Stage(stage())
    assert steps == ["ran"] and made.task is None       # before any await
    assert await made.outcome() == "value"


async def test_what_a_stage_raises_in_its_first_step_is_raised_at_once():
    async def stage() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        Stage(stage())


async def _turns_to_wake(wait) -> int:
    """Turns of the loop from the end of a stage's wait until `wait(stage task)` returns."""
    gate = asyncio.get_running_loop().create_future()

    async def stage() -> str:
        await gate
        return "done"

    waiting = asyncio.ensure_future(wait(stage()))
    for _ in range(3):
        await asyncio.sleep(0)                 # every task involved is now waiting
    turns = Turns()
    gate.set_result(None)
    assert await waiting == "done"
    turns.stop()
    return turns.count


async def test_the_awaiter_wakes_a_turn_sooner_than_through_asyncio_shield():
    async def through_stage(coro):
        return await Stage(coro).outcome()

    async def through_shield(coro):
        return await asyncio.shield(asyncio.ensure_future(coro))

    assert await _turns_to_wake(through_stage) == await _turns_to_wake(through_shield) - 1


async def test_cancelling_the_awaiter_leaves_the_stage_running_to_its_end():
    gate = asyncio.get_running_loop().create_future()
    ended: list[str] = []

    async def stage() -> str:
        await gate
        ended.append("ended")
        return "done"

    made = Stage(stage())
    waiting = asyncio.ensure_future(made.outcome())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert made.task is not None and not made.task.done() and not gate.cancelled()
    gate.set_result(None)
    assert await made.task == "done" and ended == ["ended"]
    assert await made.outcome() == "done"      # awaited again, once it ended


async def test_a_stage_cancelled_itself_raises_cancelled_error_to_its_awaiter():
    async def stage() -> None:
        await asyncio.sleep(10)

    made = Stage(stage())
    waiting = asyncio.ensure_future(made.outcome())
    await asyncio.sleep(0)
    assert made.task is not None
    made.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert not waiting.cancelled() or made.task.cancelled()


async def test_a_later_stage_starts_at_the_next_turn():
    steps: list[str] = []

    async def stage() -> str:
        steps.append("ran")
        return "value"

    made = Stage(stage(), later=True)
    assert steps == [] and made.task is not None
    assert await made.outcome() == "value" and steps == ["ran"]


async def test_launch_makes_no_future_for_a_coroutine_done_in_its_first_step():
    from codemode.pipeline import launch

    loop = asyncio.get_running_loop()
    steps: list[str] = []

    async def quick() -> str:
        steps.append("quick")
        return "dropped"

    async def waits() -> None:
        await asyncio.sleep(0)
        steps.append("waited")

    async def raises() -> None:
        raise ValueError("bad")

    assert launch(quick(), loop) is None and steps == ["quick"]
    task = launch(waits(), loop)
    assert isinstance(task, asyncio.Task) and not task.done()
    await task
    assert steps == ["quick", "waited"]
    failed = launch(raises(), loop)
    assert failed is not None and failed.done()
    with pytest.raises(ValueError, match="bad"):
        failed.result()


async def test_a_coroutine_that_yields_a_turn_goes_on_at_the_next_turn():
    """A bare yield (`asyncio.sleep(0)`) in the first step: the task made for the rest
    resumes it in its own first step, the next turn of the loop, not one turn later."""
    from codemode.pipeline import eager

    steps: list[str] = []

    async def yields() -> str:
        steps.append("first")
        await asyncio.sleep(0)
        steps.append("second")
        return "done"

    made = eager(yields())
    assert steps == ["first"]
    await asyncio.sleep(0)          # the turn the coroutine yielded to
    assert steps == ["first", "second"] and made.done() and made.result() == "done"
