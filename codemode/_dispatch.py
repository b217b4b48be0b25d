"""Serving one run's sub-call batches through the session's pipeline (docs/design.md §4,
docs/pipeline-spec.md §11.4).

The sandbox calls `SubCallDispatcher.dispatch` on its own thread with a batch (wire format:
`sandbox._wire`); the dispatcher hops onto the session's event loop, submits each new call
to the run's `Scheduler` (the same one a native batch runs on: ordered starts, the pool of
`max_concurrent_subcalls`, the exclusive barrier, ordered commits), and answers with the
calls that settled. What this module adds is the sub-call's identity and its log:

1. each call is numbered `n` in arrival order and gets the parent token: `sub_call_id =
   "<run_code callId>:code:<n>"`, `root_call_id` of the outer call, `parent_call_id` = the
   outer call, and the outer execution's opaque token as `parent` (whatever the program
   sent is ignored: only name and arguments are read from the batch);
2. when it starts, `tool/code-dispatch-start` is logged;
3. when it commits, `tool/code-dispatch` is logged with the final content and the code of
   the rejection, its `additionalContexts` (and media) are deferred to after the outer
   result, and only then is it reported to the program.

Dispatch events are written only while a turn is open (`Session.call` and `call_batch`
open one): a run through `session.execute` with no turn open still sends every sub-call
through the pipeline (policy, finalizer, `tools/result`) but logs no dispatch events.

A name that is not exposed to the run never reaches a tool, but it reaches policy like a
name visible nowhere: pre-execute, guards and the finalizer see it, and it fails
`UNKNOWN_TOOL` at dispatch, logged like any sub-call. A call the guest found not to fit the
tool's signature (`invalid` on the wire) is recorded the same way and fails `INVALID_ARGS`.
Arguments naming a parent-token field (`RESERVED_ARGUMENTS`) are refused the same way:
only the host mints those, so such a call fails `INVALID_ARGS`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from codemode.pipeline import (
    CallResult,
    CallState,
    ExecutionInput,
    OutcomeUnknownError,
    RunContext,
    Scheduled,
    Scheduler,
    Session,
    Signal,
    events,
)
from codemode.sandbox import _wire

from ._rejections import rejection_code

# Seconds a sub-call may take to stop after its run ended before it is abandoned.
ABANDON_AFTER_S = 1.0

RESERVED_ARGUMENTS = frozenset({"root_call_id", "parent_call_id", "sub_call_id",
                                "rootCallId", "parentCallId", "subCallId"})
"""Top-level argument names a program may not send: the parent token's fields, which the
host sets on every sub-call (a program must not make a call look like another's child)."""

ABANDONED_MESSAGE = (
    f"tool call abandoned: it did not stop within {ABANDON_AFTER_S:g} s of the run's end, so "
    "its outcome is unknown; it may or may not have taken effect — check the current state "
    "before retrying")

RUN_OVER_MESSAGE = "run is over; not dispatched"


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


@dataclass(frozen=True)
class _SubCall:
    """What the dispatcher knows of one sub-call besides its place in the scheduler (whose
    `CallState` says where it is)."""

    guest_id: int
    sub_call_id: str
    name: str
    raw_args: bytes                 # the guest's JSON text: decoded afresh for each use
    invalid: str | None             # the guest found it did not fit the signature: why
    signal: Signal                  # the run's scope, and the program's own cancel

    def arguments(self) -> Any:
        return msgspec.json.decode(self.raw_args)


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
        self._run_signal = run_signal
        self._scheduler = Scheduler(session.prepare, pool=max_concurrent,
                                    exclusive=self._exclusive, on_start=self._log_start,
                                    on_commit=self._commit)
        self._by_guest_id: dict[int, Scheduled] = {}
        self._unreported: list[Scheduled] = []     # submitted by a batch, not yet answered
        # Dispatch events belong inside a turn (docs/pipeline-spec.md §10). A run with none open
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
        for wire_call in request.calls:
            if self._run_signal.aborted:   # the run is over (`drain`): refused unnumbered, unlogged
                replies.append(_wire.SubCallResult(id=wire_call.id, ok=False, code="ABORTED",
                                                   message=RUN_OVER_MESSAGE))
            elif wire_call.id in self._by_guest_id:
                replies.append(_wire.SubCallResult(
                    id=wire_call.id, ok=False, code="TOOL_ERROR",
                    message=f"sub-call id {wire_call.id} was already used"))
            else:
                self._submit(wire_call)
        for guest_id in request.cancel:
            call = self._by_guest_id.get(guest_id)
            if call is not None:
                call.data.signal.abort("cancelled by the program")
        pending = self._unreported
        wanted = None if request.until is None else set(request.until)
        targets = [c for c in pending if wanted is None or c.data.guest_id in wanted]
        if targets and not any(c.done.done() for c in targets) and (request.wait_s or 0) > 0:
            await asyncio.wait([c.done for c in targets], timeout=request.wait_s,
                               return_when=asyncio.FIRST_COMPLETED)
        self._unreported = [c for c in pending if not c.done.done()]
        replies.extend(self._reply(c) for c in pending if c.done.done())
        return _wire.encoder.encode(_wire.BatchReply(results=replies)).decode()

    def _submit(self, wire_call: _wire.SubCall) -> None:
        n = len(self._by_guest_id) + 1
        outer = self._outer.execution
        raw_args = bytes(wire_call.args)
        sub = _SubCall(guest_id=wire_call.id, sub_call_id=f"{outer.call_id}:code:{n}",
                       name=wire_call.name, raw_args=raw_args,
                       invalid=wire_call.invalid or _reserved_reason(raw_args),
                       signal=Signal.any(self._run_signal))
        inp = ExecutionInput(
            call_id=sub.sub_call_id, name=sub.name, arguments=sub.arguments(), signal=sub.signal,
            root_call_id=outer.root_call_id, agent=outer.agent, parent=outer.token,
            reachable=self._reachable, argument_error=sub.invalid)
        call = self._scheduler.submit(inp, data=sub)
        self._by_guest_id[sub.guest_id] = call
        self._unreported.append(call)

    def _exclusive(self, call: Scheduled) -> bool:
        """Concurrency-safe only by the tool's own classifier; an unexposed name or a call
        of the wrong shape is exclusive (docs/pipeline-spec.md §2 S0)."""
        sub: _SubCall = call.data
        return sub.name not in self._exposed or sub.invalid is not None or \
            self._session.classify(sub.name, sub.arguments(),
                                   self._outer.execution.agent) == "exclusive"

    # ---- the sub-call's own events -----------------------------------------------------

    def _log_start(self, call: Scheduled) -> None:
        if not self._record:
            return
        sub: _SubCall = call.data
        outer = self._outer.execution
        self._session.log.append(events.CodeDispatchStart(
            root_call_id=outer.root_call_id, parent_call_id=outer.call_id,
            sub_call_id=sub.sub_call_id, name=sub.name, arguments=sub.arguments()))

    async def _commit(self, call: Scheduled) -> None:
        result = call.result
        assert result is not None
        execution = call.pending.execution if call.pending is not None else None
        # The durable copy goes through the `tools/code-dispatch-log` waterfall.
        content = await self._session.code_dispatch_content(execution, result)
        self._log_settle(call, result, content)
        for context in result.additional_contexts:    # deferred past the outer result
            self._outer.defer_context(context)
        if not result.is_error and any(_is_media(b) for b in result.content):
            # The model never sees a sub-call's result, so an image (audio, a resource) in
            # it would be lost: it follows the outer result as one more user message
            # (docs/pipeline-spec.md §8.3).
            self._outer.defer_context(list(result.content))
        if result.concludes_turn:
            self._outer.conclude_turn()
        self.summary.total += 1
        sub: _SubCall = call.data
        self.summary.by_tool[sub.name] = self.summary.by_tool.get(sub.name, 0) + 1
        if result.is_error:
            self.summary.failed += 1
            if rejection_code(result) == "DENIED":
                self.summary.denied += 1

    def _log_settle(self, call: Scheduled, result: CallResult, content: tuple[Any, ...]) -> None:
        if not self._record:
            return
        sub: _SubCall = call.data
        outer = self._outer.execution
        self._session.log.append(events.CodeDispatch(
            root_call_id=outer.root_call_id, parent_call_id=outer.call_id,
            sub_call_id=sub.sub_call_id, name=sub.name, arguments=sub.arguments(),
            is_error=result.is_error, content=content,
            code=rejection_code(result) if result.is_error else msgspec.UNSET))

    def _reply(self, call: Scheduled) -> _wire.SubCallResult:
        guest_id = call.data.guest_id
        result = call.result
        if result is None:
            return _wire.SubCallResult(id=guest_id, ok=False, code="TOOL_ERROR",
                                       message=f"sub-call failed in the host: {call.error}")
        if not result.is_error:
            return _wire.SubCallResult(id=guest_id, ok=True, value=result.value)
        assert result.error is not None
        return _wire.SubCallResult(id=guest_id, ok=False, code=rejection_code(result),
                                   message=result.error.message)

    async def drain(self) -> None:
        """After the run settled: abort the run scope, drop calls that never started, and
        await the ones in flight and their commits (docs/pipeline-spec.md §11.3 step 4).

        A tool that ignores the abort cannot hold the run past its limit: a call still
        unsettled `ABANDON_AFTER_S` seconds later is abandoned. Nobody knows whether it
        will take effect, so it is committed as `TOOL_OUTCOME_UNKNOWN` through the
        pipeline (the finalizer and `tools/result` run for it, as after crash repair) and
        logged; its body is left to finish on its own, its result discarded."""
        self._run_signal.abort("settled")
        hanging = await self._scheduler.drain(
            abandon_after_s=ABANDON_AFTER_S,
            abandon_error=lambda: OutcomeUnknownError(ABANDONED_MESSAGE))
        for call in hanging:              # even its commit hangs (a log listener): log it anyway
            if call.state is not CallState.QUEUED:
                result = call.result or CallResult.failure(
                    ABANDONED_MESSAGE, code="TOOL_OUTCOME_UNKNOWN", name="ToolOutcomeUnknown")
                self._log_settle(call, result, tuple(result.content))


def _reserved_reason(raw_args: bytes) -> str | None:
    """Why the arguments are refused when a top-level name is a parent-token field (the
    first such name, sorted), else None."""
    arguments = msgspec.json.decode(raw_args)
    if not isinstance(arguments, dict):
        return None
    reserved = sorted(k for k in arguments if k in RESERVED_ARGUMENTS)
    if not reserved:
        return None
    return (f'"{reserved[0]}" is reserved for the host (it sets the parent token of every '
            "sub-call)")


def _is_media(block: Any) -> bool:
    """An image, audio, embedded resource or any other block that is not text."""
    return isinstance(block, dict) and block.get("type") != "text"
