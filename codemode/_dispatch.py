"""Serving one run's sub-call batches through the session's pipeline (DESIGN.md §4,
PIPELINE.md §11.4).

The sandbox calls `SubCallDispatcher.dispatch` on its own thread with a batch (wire format:
`sandbox._wire`); the dispatcher hops onto the session's event loop, starts each new call in
submission order, and answers with the calls that settled. Each sub-call:

1. is numbered `n` in arrival order and gets the parent token: `sub_call_id =
   "<run_code callId>:code:<n>"`, `root_call_id` of the outer call, `parent_call_id` = the
   outer call, and the outer execution's opaque token as `parent` (whatever the program
   sent is ignored: only name and arguments are read from the batch);
2. waits for the previous call's start (ordered starts) and for a slot in the pool
   (`max_concurrent_subcalls`), then logs `tool/code-dispatch-start` and runs the whole
   pipeline in its phases: `Session.start` (pre-execute, approval, guards) one call at a
   time, `dispatch` (wrappers and body) overlapping with other calls, `commit`
   (post-execute, finalize, `tools/result`) in submission order; a call whose tool is not
   concurrency-safe runs alone;
3. commits in submission order: logs `tool/code-dispatch` with the final content, forwards
   its `additionalContexts` to the outer call, and only then is reported to the program.

Dispatch events are written only while a turn is open (`Session.call` and `call_batch`
open one): a run through `session.execute` with no turn open still sends every sub-call
through the pipeline (policy, finalizer, `tools/result`) but logs no dispatch events.

A name that is not exposed to the run never reaches a tool, but it reaches policy like a
name visible nowhere: pre-execute, guards and the finalizer see it, and it fails
`UNKNOWN_TOOL` at dispatch, logged like any sub-call. A call the guest found not to fit the
tool's signature (`invalid` on the wire) is recorded the same way and fails `INVALID_ARGS`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from codemode.pipeline import (CallResult, ExecutionInput, OutcomeUnknownError, PendingCall,
                               RunContext, Session, Signal, events)
from codemode.sandbox import _wire

from ._rejections import rejection_code


# Seconds a sub-call may take to stop after its run ended before it is abandoned.
ABANDON_AFTER_S = 1.0


@dataclass
class SubCallSummary:
    """Counts over one run's sub-calls, for the `run_code` result."""

    total: int = 0
    failed: int = 0
    denied: int = 0
    by_tool: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"total": self.total, "failed": self.failed, "denied": self.denied,
                "by_tool": dict(self.by_tool)}


class _SubCall:
    def __init__(self, guest_id: int, n: int, sub_call_id: str, name: str, raw_args: bytes,
                 signal: Signal, loop: asyncio.AbstractEventLoop,
                 invalid: str | None = None) -> None:
        self.guest_id = guest_id
        self.n = n
        self.sub_call_id = sub_call_id
        self.name = name
        self.raw_args = raw_args
        self.invalid = invalid
        self.signal = signal
        self.started: asyncio.Future[None] = loop.create_future()
        self.committed: asyncio.Future[None] = loop.create_future()
        self.result: CallResult | None = None
        self.task: asyncio.Task[None] | None = None
        self.logged_start = False
        self.commit_logged = False
        self.execution: Any = None                # the pipeline's execution, once started
        self.pending: PendingCall | None = None   # the pipeline's call, once prepared
        self.starting: asyncio.Future[None] | None = None      # its S3-S7 phase
        self.dispatching: asyncio.Future[None] | None = None   # its S8-S10 phase


class SubCallDispatcher:
    """One run's bridge from sandbox batches to pipeline calls.

    Args:
        session: the session whose pipeline every sub-call goes through.
        outer: the `run_code` call's run context (its execution gives the parent token).
        exposed: names of the tools this run may call.
        loop: the session's event loop (the dispatcher is called from another thread).
        max_concurrent: sub-calls running at the same time (>= 1).
        run_signal: the run scope; aborted when the run settles or the outer call aborts.
    """

    def __init__(self, session: Session, outer: RunContext, exposed: Mapping[str, Any],
                 loop: asyncio.AbstractEventLoop, max_concurrent: int,
                 run_signal: Signal) -> None:
        self._session = session
        self._outer = outer
        self._exposed = exposed
        self._reachable = frozenset(exposed)
        self._loop = loop
        self._pool = asyncio.Semaphore(max_concurrent)
        self._run_signal = run_signal
        self._by_guest_id: dict[int, _SubCall] = {}
        self._order: list[_SubCall] = []
        self._unreported: list[_SubCall] = []     # started by a batch, not yet answered
        self._closed = False
        # Dispatch events belong inside a turn (PIPELINE.md §10). A run with none open
        # (`session.execute` outside `session.turn()`) governs its sub-calls all the same
        # but writes no dispatch events.
        self._record = session.turn_open
        self.summary = SubCallSummary()

    # ---- called on the sandbox's thread ------------------------------------------------

    def dispatch(self, batch: str) -> str:
        """The sandbox's `Dispatch`: JSON batch in, JSON reply out (`sandbox._wire`)."""
        future = asyncio.run_coroutine_threadsafe(self._serve(batch), self._loop)
        return future.result()

    # ---- on the session's loop ---------------------------------------------------------

    async def _serve(self, batch: str) -> str:
        request = _wire.request_decoder.decode(batch)
        replies: list[_wire.SubCallResult] = []
        for call in request.calls:
            if self._closed or self._run_signal.aborted:   # refused first: no number, no event
                replies.append(_wire.SubCallResult(
                    id=call.id, ok=False, code="ABORTED", message="run is over; not dispatched"))
                continue
            if call.id in self._by_guest_id:
                replies.append(_wire.SubCallResult(
                    id=call.id, ok=False, code="TOOL_ERROR",
                    message=f"sub-call id {call.id} was already used"))
                continue
            self._submit(call)
        for guest_id in request.cancel:
            sub = self._by_guest_id.get(guest_id)
            if sub is not None:
                sub.signal.abort("cancelled by the program")
        pending = self._unreported
        if request.until is not None:
            wanted = set(request.until)
            targets = [s for s in pending if s.guest_id in wanted]
        else:
            targets = pending
        tasks = [s.task for s in targets if s.task is not None]
        if tasks and not any(t.done() for t in tasks) and (request.wait_s or 0) > 0:
            await asyncio.wait(tasks, timeout=request.wait_s,
                               return_when=asyncio.FIRST_COMPLETED)
        still = []
        for sub in pending:
            if sub.task is not None and sub.task.done():
                replies.append(self._reply(sub))
            else:
                still.append(sub)
        self._unreported = still
        return _wire.encoder.encode(_wire.BatchReply(results=replies)).decode()

    def _submit(self, call: _wire.SubCall) -> _SubCall:
        n = len(self._order) + 1
        previous = self._order[-1] if self._order else None
        sub = _SubCall(call.id, n, f"{self._outer.execution.call_id}:code:{n}", call.name,
                       bytes(call.args), Signal.any(self._run_signal), self._loop, call.invalid)
        self._by_guest_id[call.id] = sub
        self._order.append(sub)
        sub.task = self._loop.create_task(self._run(sub, previous))
        self._unreported.append(sub)
        return sub

    async def _run(self, sub: _SubCall, previous: _SubCall | None) -> None:
        """Start in submission order (S3-S7, one at a time), dispatch in the pool (S8-S10,
        overlapping), commit in submission order (S11-S14). An exclusive call (the tool's
        classifier did not say concurrency-safe) starts only after every earlier call
        committed and holds the barrier until its own commit (PIPELINE.md §11.4)."""
        exclusive = sub.name not in self._exposed or sub.invalid is not None or \
            self._session.classify(sub.name, self._arguments(sub),
                                   self._outer.execution.agent) == "exclusive"
        try:
            if previous is not None:
                # An exclusive call settles `started` only after its commit: a barrier.
                await asyncio.shield(previous.committed if exclusive else previous.started)
            async with self._pool:
                self._log_start(sub)
                pending = sub.pending = self._session.prepare(self._input(sub))
                # S3-S7 as its own task too: a policy stage that ignores the run's end
                # cannot keep the call from being abandoned and committed.
                sub.starting = asyncio.ensure_future(pending.start())
                await asyncio.shield(sub.starting)
                sub.execution = pending.execution
                if not exclusive:
                    _settle(sub.started)              # the next call may start now
                # Its own task, so abandoning this call never waits on a body that
                # ignores (or swallows) cancellation.
                sub.dispatching = asyncio.ensure_future(pending.dispatch())
                await asyncio.shield(sub.dispatching)
            if previous is not None:
                await asyncio.shield(previous.committed)
            sub.result = await pending.commit()
            await self._commit(sub)
        except asyncio.CancelledError:
            if not sub.logged_start:               # queued, never started: no events
                sub.result = CallResult.failure("run is over; not dispatched", code="ABORTED")
            else:                                  # started, then abandoned by `drain`
                if previous is not None:           # commits stay in submission order
                    await asyncio.shield(previous.committed)
                sub.result = await self._settle_abandoned(sub)
                await self._commit(sub)
        except Exception as exc:                   # the pipeline itself failed: still commit
            sub.result = CallResult.failure(f"sub-call failed in the host: {exc}")
            if sub.logged_start and not sub.committed.done():
                await self._commit(sub)
        finally:
            _settle(sub.started)
            _settle(sub.committed)

    async def _settle_abandoned(self, sub: _SubCall) -> CallResult:
        """The outcome of a started call whose task `drain` cancelled: committed through
        the pipeline (post-execute if its body finished, the finalizer, `tools/result`)
        as it stands, or `TOOL_OUTCOME_UNKNOWN` if it was still running."""
        pending = sub.pending
        if pending is None:                        # never prepared: nothing ran
            return _abandoned()
        sub.execution = pending.execution
        if pending.published is not None:          # committed; only the log write was cut
            return pending.published
        if pending.phase == "dispatched" and not pending.abandoned and \
                (sub.dispatching is None or _succeeded(sub.dispatching)):
            return await pending.commit()          # it finished; it only waited its turn
        pending.abandon(OutcomeUnknownError(ABANDONED_MESSAGE))
        return await pending.commit()

    def _input(self, sub: _SubCall) -> ExecutionInput:
        outer = self._outer.execution
        return ExecutionInput(
            call_id=sub.sub_call_id, name=sub.name, arguments=self._arguments(sub),
            signal=sub.signal, root_call_id=outer.root_call_id, agent=outer.agent,
            parent=outer.token, reachable=self._reachable, argument_error=sub.invalid)

    def _arguments(self, sub: _SubCall) -> Any:
        return msgspec.json.decode(sub.raw_args)  # a fresh copy per use

    def _log_start(self, sub: _SubCall) -> None:
        sub.logged_start = True
        if not self._record:
            return
        outer = self._outer.execution
        self._session.log.append(events.CodeDispatchStart(
            root_call_id=outer.root_call_id, parent_call_id=outer.call_id,
            sub_call_id=sub.sub_call_id, name=sub.name, arguments=self._arguments(sub)))

    async def _commit(self, sub: _SubCall) -> None:
        result = sub.result
        assert result is not None
        # The durable copy goes through the `tools/code-dispatch-log` waterfall.
        content = await self._session.code_dispatch_content(sub.execution, result)
        if sub.commit_logged:                     # committed once, whatever interrupted
            return
        self._log_settle(sub, content)
        for context in result.additional_contexts:    # deferred past the outer result
            self._outer.defer_context(context)
        if not result.is_error and any(_is_media(b) for b in result.content):
            # The model never sees a sub-call's result, so an image (audio, a resource) in
            # it would be lost: it follows the outer result as one more user message
            # (PIPELINE.md §8.3).
            self._outer.defer_context(list(result.content))
        if result.concludes_turn:
            self._outer.conclude_turn()
        self.summary.total += 1
        self.summary.by_tool[sub.name] = self.summary.by_tool.get(sub.name, 0) + 1
        if result.is_error:
            self.summary.failed += 1
            if rejection_code(result) == "DENIED":
                self.summary.denied += 1

    def _log_settle(self, sub: _SubCall, content: tuple[Any, ...]) -> None:
        assert sub.result is not None
        outer = self._outer.execution
        sub.commit_logged = True
        if not self._record:
            return
        self._session.log.append(events.CodeDispatch(
            root_call_id=outer.root_call_id, parent_call_id=outer.call_id,
            sub_call_id=sub.sub_call_id, name=sub.name, arguments=self._arguments(sub),
            is_error=sub.result.is_error, content=content,
            code=rejection_code(sub.result) if sub.result.is_error else msgspec.UNSET))

    def _reply(self, sub: _SubCall) -> _wire.SubCallResult:
        result = sub.result
        if result is None:
            return _wire.SubCallResult(id=sub.guest_id, ok=False, code="ABORTED",
                                       message="tool call aborted")
        if not result.is_error:
            return _wire.SubCallResult(id=sub.guest_id, ok=True, value=result.value)
        assert result.error is not None
        return _wire.SubCallResult(id=sub.guest_id, ok=False, code=rejection_code(result),
                                   message=result.error.message)

    async def drain(self) -> None:
        """After the run settled: abort the run scope, drop calls that never started, and
        await the ones in flight and their commits (PIPELINE.md §11.3 step 4).

        A tool that ignores the abort cannot hold the run past its limit: a call still
        unsettled `ABANDON_AFTER_S` seconds later is abandoned. Nobody knows whether it
        will take effect, so it is committed as `TOOL_OUTCOME_UNKNOWN` through the
        pipeline (the finalizer and `tools/result` run for it, as after crash repair) and
        logged; its body is left to finish on its own, its result discarded."""
        self._closed = True
        self._run_signal.abort("settled")
        for sub in self._order:
            if sub.task is not None and not sub.logged_start:
                sub.task.cancel()
        tasks = [s.task for s in self._order if s.task is not None and not s.task.done()]
        if not tasks:
            return
        _, stuck = await asyncio.wait(tasks, timeout=ABANDON_AFTER_S)
        for task in stuck:
            task.cancel()
        if stuck:
            _, still = await asyncio.wait(stuck, timeout=ABANDON_AFTER_S)
            for sub in self._order:                # whatever still hangs: log it anyway
                if sub.task in still and sub.logged_start and not sub.commit_logged:
                    published = sub.pending.published if sub.pending is not None else None
                    sub.result = published or _abandoned()
                    self._log_settle(sub, tuple(sub.result.content))


def _is_media(block: Any) -> bool:
    """An image, audio, embedded resource or any other block that is not text."""
    return isinstance(block, dict) and block.get("type") != "text"


ABANDONED_MESSAGE = (
    f"tool call abandoned: it did not stop within {ABANDON_AFTER_S:g} s of the run's end, so "
    "its outcome is unknown; it may or may not have taken effect — check the current state "
    "before retrying")


def _abandoned() -> CallResult:
    return CallResult.failure(ABANDONED_MESSAGE, code="TOOL_OUTCOME_UNKNOWN",
                              name="ToolOutcomeUnknown")


def _succeeded(task: asyncio.Future[None] | None) -> bool:
    return (task is not None and task.done() and not task.cancelled()
            and task.exception() is None)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
