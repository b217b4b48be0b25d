"""A model's tool calls as the session logs them (docs/pipeline-spec.md §2 S0–S2, S15–S17,
§4.3): one assistant message's calls (``call_batch``), one call as a batch of one
(``call``), a suspended call resumed as a batch of one (``resume``). Each batch is one
step of a turn: ``tool/call`` appended when a call starts, the registry's S3–S14,
``tool/result`` appended in model order, and after the step's end marker the queued
``additionalContexts`` delivered FIFO as ``user/message`` events.

Separate from the session's tools and policy, which a call only reads, and from the
turns and inbox (``_turns``), which a batch writes into.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import msgspec

from ._definition import ToolDefinition
from ._errors import ResumeError
from ._execution import ExecutionInput
from ._registry import ToolRegistry
from ._result import CallResult
from ._resume import Resumption, find_suspension, normalize_decisions
from ._scheduler import Scheduled, Scheduler
from ._shield import shielded
from ._signal import Signal
from ._turns import Turns
from .events import (
    ApprovalDecision,
    Event,
    MessageSource,
    StepEnd,
    StepStart,
    ToolCall,
    ToolResult,
    ToolResultBlock,
    ToolResultMessage,
    ToolResumed,
    TurnEnd,
)

__all__ = ["Batches"]


class Batches(Turns):
    """The model's tool calls of a ``Session``, in batches."""

    # set by ``Session.__init__``; ``resolve`` is ``Session.resolve``
    max_parallel_tool_calls: int
    resolve: Callable[[str, str | None], ToolDefinition | None]
    _registry: ToolRegistry
    _open_steps: int            # batches whose step is open (concurrent calls overlap)
    _implicit_batches: int      # batches sharing a turn that a batch opened
    _implicit_cancelled: bool

    async def call(
        self,
        name: str,
        arguments: Any = None,
        *,
        agent: str | None = None,
        signal: Signal | None = None,
        call_id: str | None = None,
    ) -> CallResult:
        """One model tool call as a batch of one (see ``call_batch``)."""
        item = (
            (name, arguments if arguments is not None else {})
            if call_id is None
            else (name, arguments, call_id)
        )
        [result] = await self.call_batch([item], agent=agent, signal=signal)
        return result

    async def call_batch(
        self,
        calls: Iterable[tuple[Any, ...]],
        *,
        agent: str | None = None,
        signal: Signal | None = None,
        max_parallel: int | None = None,
    ) -> list[CallResult]:
        """Run one assistant message's tool calls (S0–S17) and return results in order.

        Each item is ``(name, arguments)`` or ``(name, arguments, call_id)``; ``arguments``
        is a parsed value or the model's raw JSON text (``""`` -> ``{}``, non-JSON text is
        passed on as the string). Concurrency-safe calls run in a rolling pool of
        ``max_parallel`` (default ``max_parallel_tool_calls``); any other call runs alone.
        S1–S7 run one call at a time in model order; ``tool/result`` commits in model
        order. Opens (and closes) a turn if none is open; the batch is one step. After
        the step's end marker the results' contexts are appended as ``user/message`` (FIFO).
        Cancelling the awaiting task aborts the batch: every call still gets its
        ``tool/result`` before ``CancelledError`` propagates.
        """
        items = [self._parse_item(raw) for raw in calls]
        cancel = Signal()
        batch_signal = Signal.any(signal, cancel) if signal is not None else cancel
        try:
            # The batch's first step (the turn, the step) runs now; its calls start at the
            # loop's next turn, so that batches started together (concurrent calls of tools
            # that never wait) still run at the same time and share the implicit turn.
            results: list[CallResult] = await shielded(
                self._batch(
                    items, agent, batch_signal, max_parallel or self.max_parallel_tool_calls
                ),
                cancel,
            )
            return results
        finally:
            batch_signal.detach()

    def _parse_item(self, raw: Any) -> tuple[str, str, Any, str]:
        if isinstance(raw, (tuple, list)) and len(raw) in (2, 3):
            name, arguments = raw[0], raw[1]
            call_id = raw[2] if len(raw) == 3 else f"call_{os.urandom(8).hex()}"
        else:
            raise TypeError("each call is (name, arguments) or (name, arguments, call_id)")
        if isinstance(arguments, str):
            text = arguments
            if not text.strip():
                parsed: Any = {}
            else:
                try:
                    parsed = msgspec.json.decode(text)
                except (msgspec.DecodeError, UnicodeEncodeError):
                    parsed = text
        else:
            parsed = arguments
            try:
                text = msgspec.json.encode(arguments).decode()
            except Exception:
                text = repr(arguments)
        if not text.isascii():  # the log is UTF-8: keep unpaired surrogates visible, not fatal
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        return str(name), text, parsed, str(call_id)

    def classify(
        self, name: str, arguments: Any, agent: str | None = None
    ) -> Literal["parallel", "exclusive"]:
        """``parallel`` only if the visible definition's classifier returns exactly ``True``."""
        defn = self.resolve(name, agent)
        if defn is None or defn.is_concurrency_safe is None:
            return "exclusive"
        try:
            verdict = defn.is_concurrency_safe(arguments)
        except BaseException:
            return "exclusive"
        return "parallel" if verdict is True else "exclusive"

    async def resume(
        self,
        run_id: str,
        decisions: Mapping[str, bool] | Iterable[ApprovalDecision],
        *,
        signal: Signal | None = None,
    ) -> CallResult:
        """Go on with a suspended call (docs/pipeline-spec.md §4.3): a call that returned a
        pending result and logged ``tool/suspended`` (a Code-Mode run waiting for approvals).

        The latest suspension of ``run_id`` is read from the log, so the run may have been
        suspended by another process. ``tool/resumed`` is appended (the log refuses a second
        resumption of one suspension: each approval is used once), then the tool is called
        again as a batch of one with call id ``"<run id>:resume:<k>"``, the suspended call's
        arguments, and ``ctx.resumption`` set; that call goes through the whole pipeline and
        gets its ``tool/call`` and ``tool/result`` like any other. It may suspend again.

        Args:
            run_id: the id of the run (its first call's id, as the pending result says).
            decisions: ``{request id: approved}`` or ``ApprovalDecision``s (a denial with a
                reason), one for every pending request.
            signal: cancels the resumed call.
        Returns:
            The resumed call's result (possibly pending again).
        Raises:
            ResumeError: no suspension of ``run_id`` is waiting, the decisions do not match
                its requests, or its tool is gone or not resumable.
        """
        suspended, resumed = find_suspension(self.log.read(), run_id)
        agent = suspended.agent if isinstance(suspended.agent, str) else None
        defn = self.resolve(suspended.name, agent)
        if defn is None or not defn.resumable:
            raise ResumeError(f'tool "{suspended.name}" of run {run_id!r} is not available '
                              "to resume it (not registered, or not resumable)")
        ordered = normalize_decisions(decisions, suspended.requests)
        call_id = f"{run_id}:resume:{resumed + 1}"
        self.log.append(ToolResumed(run_id=run_id, call_id=call_id, decisions=ordered))
        resumption = Resumption(run_id=run_id, call_id=call_id, state=suspended.state,
                                decisions=ordered, requests=suspended.requests)
        name, text, parsed, _ = self._parse_item((suspended.name, suspended.arguments, call_id))
        cancel = Signal()
        batch_signal = Signal.any(signal, cancel) if signal is not None else cancel
        try:
            results: list[CallResult] = await shielded(
                self._batch([(name, text, parsed, call_id)], agent, batch_signal, 1,
                            resumption=resumption),
                cancel,
            )
            return results[0]
        finally:
            batch_signal.detach()

    async def _batch(
        self, items: list[tuple[str, str, Any, str]], agent: str | None, signal: Signal,
        pool: int, *, resumption: Resumption | None = None,
    ) -> list[CallResult]:
        # A batch with no turn open opens one; batches running meanwhile (concurrent
        # `call`s on one session) join it, and the last to finish closes it, so no result
        # lands after the turn's end. Their steps overlap; each is closed by its batch.
        implicit = not self._turn_open or self._implicit_batches > 0
        if not self._turn_open:
            self.begin_turn()
            self._implicit_cancelled = False
        if implicit:
            self._implicit_batches += 1
        self._open_steps += 1
        self._step += 1
        turn, step = self._turn, self._step
        self.log.append(StepStart(turn=turn, step=step))
        concluded = False
        calls: dict[int, Event] = {}          # submission index -> its tool/call event

        def on_start(call: Scheduled) -> None:
            name, text, _, call_id = call.data
            calls[call.index] = self.log.append(
                ToolCall(turn=turn, step=step, call_id=call_id, name=name, arguments=text))

        async def on_commit(call: Scheduled) -> None:
            nonlocal concluded
            result = call.result
            assert result is not None
            call_id = call.data[3]
            committed = self.log.append(
                self._tool_result_event(turn, step, call_id, calls[call.index].seq, result))
            for context in result.additional_contexts:
                self._queue(
                    context, MessageSource(kind="context", call_id=call_id), (committed.seq,)
                )
            if result.concludes_turn and not result.is_error:
                concluded = True

        scheduler = Scheduler(
            self._registry.prepare, pool=pool, on_start=on_start, on_commit=on_commit,
            exclusive=lambda call: self.classify(call.data[0], call.data[2], agent) == "exclusive",
            abandons=False, loop=asyncio.get_running_loop())
        try:
            for item in items:
                name, _, parsed, call_id = item
                scheduler.submit(
                    ExecutionInput(call_id=call_id, name=name, arguments=parsed, signal=signal,
                                   agent=agent, resumption=resumption),
                    data=item, start=False)
            # The calls start at the loop's next turn, so that batches started together
            # (concurrent calls of tools that never wait) still run at the same time and
            # share the implicit turn; then in this task (`Scheduler.run`).
            await asyncio.sleep(0)
            done = await scheduler.run()
        finally:
            unsettled = [c.done for c in scheduler.calls if not c.done.done()]
            if unsettled:                 # (a turn of the loop; none when all are done)
                await asyncio.gather(*unsettled, return_exceptions=True)
            self.log.append(StepEnd(turn=turn, step=step))
            self._open_steps -= 1
            if not signal.aborted and self._open_steps == 0:
                # on cancellation they stay pending for the next turn; while another step is
                # open they wait for its end (never between the results of one step)
                self._deliver_inbox()
            if concluded:
                self.turn_concluded = True
            if implicit:
                self._implicit_batches -= 1
                self._implicit_cancelled = self._implicit_cancelled or signal.aborted
                if self._implicit_batches == 0:
                    reason = "cancelled" if self._implicit_cancelled else (
                        "concluded" if self.turn_concluded else "completed")
                    self.log.append(TurnEnd(turn=turn, reason=reason))
                    self._turn_open = False
        return [c.result for c in done if c.result is not None]

    @staticmethod
    def _tool_result_event(
        turn: int, step: int, call_id: str, call_seq: int, result: CallResult
    ) -> ToolResult:
        info = result.error.info if result.error is not None else None
        return ToolResult(
            turn=turn,
            step=step,
            message=ToolResultMessage(
                id=f"msg_{call_id}",
                source=MessageSource(kind="tool", call_id=call_id),
                content=(
                    ToolResultBlock(
                        tool_call_id=call_id, content=result.content, is_error=result.is_error
                    ),
                ),
            ),
            error=info if info is not None else msgspec.UNSET,
            meta=result.meta if result.meta is not None else msgspec.UNSET,
            traceback=(result.error.traceback if result.error is not None
                       and result.error.traceback is not None else msgspec.UNSET),
            source_event_seqs=(call_seq,),
        )
