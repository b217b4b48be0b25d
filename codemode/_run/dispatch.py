"""Serving one run's sub-call batches through the session's pipeline (docs/design.md §4,
docs/pipeline-spec.md §11.4).

The sandbox calls `SubCallDispatcher.dispatch` on its own thread with a batch (a
`SubCallBatch` the host decoded and checked); the dispatcher hops onto the session's event
loop, submits each new call to the run's `Scheduler` (the same one a native batch runs on:
ordered starts, the pool of `max_concurrent_subcalls`, the exclusive barrier, ordered
commits), and answers with the calls that settled. What this module adds is the
sub-call's identity and its log:

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
only the host mints those, so such a call fails `INVALID_ARGS`. A call with an empty tool
name is refused `INVALID_ARGS` by the scheduler (no pipeline call can be made for it) and
logged with that empty name, as a `tool/call` may be.

Approvals (docs/codemode.md "Pausing for approval"). Every sub-call's approval goes through
the run's own channel (`approvals`): a decision given to the resumption answers it (and
is audited like any answer); with no approver on the session, or an `Ask(defer=True)`, the
approval is deferred: the call fails `APPROVAL_PENDING` without running, and is not
answered. When the program then waits and nothing else is in flight, the run pauses
(`PauseRun`): every deferred call is a pending request, and the exchanges so far are the
record (`replay.RunRecord`) a resumed run replays (`resumed`): it answers the completed
exchanges from the record (`tool/code-replayed`, no tool runs), stops with `REPLAY_DIVERGED`
if the program asks for anything else, and goes live at the exchange where the run paused.
Each sub-call's idempotency key is `"<run id>:<n>"`, the same in every replay.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from codemode.pipeline import (
    CallResult,
    CallState,
    ExecutionInput,
    NotLosslessError,
    OutcomeUnknownError,
    PendingApproval,
    RunContext,
    Scheduled,
    Scheduler,
    Session,
    Signal,
    events,
    launch,
    snapshot,
)
from codemode.sandbox import (
    PauseRun,
    SandboxLimits,
    SubCall,
    SubCallBatch,
    SubCallErr,
    SubCallOutcome,
    SubCallReply,
    Tape,
)

from .approvals import _RunApprovals
from .discovery import DISCOVERY_NAMES
from .plan_approval import Grants
from .rejections import rejection_code
from .replay import Exchange, RecordedCall, RunRecord, sealed_answer
from .resumed import Replay, Replaying
from .seal import SealKey
from .subcalls import SubCallSummary, _all_text, _answer_of, _Slot, _SubCall
from .tagged import is_tagged

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

HostAnswer = Callable[[SubCall], SubCallOutcome]
"""A host-answered function's answer to one call of it (`SubCallDispatcher`)."""


class SubCallDispatcher(Replaying):
    """One run's bridge from sandbox batches to pipeline calls.

    Args:
        session: the session whose pipeline every sub-call goes through.
        outer: the `run_code` call's run context (its execution gives the parent token).
        exposed: names of the tools this run may call.
        loop: the session's event loop (the dispatcher is called from another thread).
        max_concurrent: sub-calls running at the same time (>= 1).
        run_signal: the run scope; aborted when the run settles or the outer call aborts.
        run_id: the run's stable id (the first call's id); it prefixes the idempotency key
            and the approval request id of every sub-call.
        replay: the paused run to replay (a resumed run), or None.
        host_answered: functions a program has besides its tools, by wire name
            (`search_tools` and `describe`, `discovery`; `read_output`, `paging`): each
            call is answered at once by the function given, outside the pipeline (no tool
            runs, no rule applies); the run's record keeps the answer for a replay, and the
            run's value counts the discovery calls. A name an exposed tool has goes to the
            pipeline as that tool. Empty: every name is a tool's.
    """

    def __init__(self, session: Session, outer: RunContext, exposed: Mapping[str, Any],
                 loop: asyncio.AbstractEventLoop, max_concurrent: int,
                 run_signal: Signal, *, run_id: str | None = None,
                 replay: Replay | None = None, seal: SealKey | None = None,
                 host_answered: Mapping[str, HostAnswer] | None = None) -> None:
        self._session = session
        self._host_answered = {name: answer for name, answer in (host_answered or {}).items()
                               if name not in exposed}
        self._outer = outer
        self._exposed = exposed
        self._reachable = frozenset(exposed)
        self._loop = loop
        self._run_signal = run_signal
        self.run_id = run_id or outer.execution.call_id
        self._scheduler = Scheduler(session.prepare, pool=max_concurrent,
                                    exclusive=self._exclusive, on_start=self._log_start,
                                    on_commit=self._commit, loop=loop)
        self._by_guest_id: dict[int, _Slot] = {}
        self._by_sub_call_id: dict[str, _Slot] = {}
        self._unreported: list[_Slot] = []     # sent by the program, not yet answered
        self._replay = replay
        self._answers = replay.record.answers() if replay is not None else {}
        self._earlier = dict(replay.earlier) if replay is not None else {}
        self._resumed = replay is not None      # live answers are logged (`_log_settle`)
        self._seal = seal                       # ... and sealed (`replay.answer_seal`)
        self._held: list[tuple[SubCall, int]] = []   # replayed, not answered: call, n
        self.went_live = replay is None         # a resumed run: past the paused exchange
        # A denial given to the resumption holds even if no rule asks about the call any
        # more: a guard refuses the denied sub-calls by id (registered while the run lasts).
        self._denied: dict[str, str] = {}
        self._dispose_guard = session.guard(lambda execution: self._denied.get(
            execution.call_id)) if replay is not None else (lambda: None)
        self._approvals = _RunApprovals(
            session, self.run_id, self._by_sub_call_id,
            dict(replay.decisions) if replay else {},
            Grants(replay.record.plan_approval, replay.record.plan_used) if replay else None)
        self.exchanges: list[Exchange] = []     # this run's record so far
        self.diverged: str | None = None        # why the replay stopped, if it did
        self.paused: list[_Slot] = []           # the calls waiting for approval at a pause
        self._settled_at_pause: list[SubCallOutcome] = []
        # Dispatch events belong inside a turn (docs/pipeline-spec.md §10). A run with none open
        # (`session.execute` outside `session.turn()`) governs its sub-calls all the same
        # but writes no dispatch events.
        self._logging = session.turn_open
        self.summary = SubCallSummary()

    # ---- called on the sandbox's thread ------------------------------------------------

    def dispatch(self, batch: SubCallBatch) -> SubCallReply:
        """The sandbox's `Dispatch`: a batch in, the calls settled since the last one out.

        Raises:
            PauseRun: the program waits only on calls whose approval was deferred.
            ReplayDiverged: a resumed program asked for other calls than the record holds.
        """
        # One hand-off each way: the batch is served from a loop callback (started there
        # at once: `launch`), whose last step releases this thread's lock
        # (`run_coroutine_threadsafe` adds a task's first turn, a Condition-based future
        # and a done callback's turn).
        done = threading.Lock()
        done.acquire()
        served: list[tuple[bool, Any]] = []

        async def serve() -> None:
            try:
                served.append((True, await self._serve(batch)))
            except BaseException as exc:        # re-raised on the sandbox's thread
                served.append((False, exc))
            finally:
                done.release()

        self._loop.call_soon_threadsafe(launch, serve(), self._loop)
        done.acquire()
        ok, reply = served[0]
        if not ok:
            raise reply
        return reply  # type: ignore[no-any-return]

    # ---- on the session's loop ---------------------------------------------------------

    async def _serve(self, request: SubCallBatch) -> SubCallReply:
        record = self._replay.record if self._replay is not None else None
        if record is not None and len(self.exchanges) < len(record.exchanges):
            recorded = record.exchanges[len(self.exchanges)]
            self._check_replay(request, recorded)
            if len(self.exchanges) + 1 < len(record.exchanges):
                return self._replay_exchange(request, recorded)
            refused = self._go_live(request, recorded)     # the exchange the run paused in
        else:
            refused = self._accept(request.calls)
        for guest_id in request.cancel:
            slot = self._by_guest_id.get(guest_id)
            if slot is not None:
                slot.sub.signal.abort("cancelled by the program")
                if slot.deferred:        # it never ran and never will: answered at once
                    slot.deferred = False
                    slot.reply = SubCallErr(id=guest_id, code="ABORTED",
                                                     message="cancelled by the program")
        self._scheduler.start()      # the batch's calls, now: each as far as it goes at once
        await self._wait(request, refused)
        answered: list[_Slot] = []
        waiting: list[_Slot] = []
        for slot in self._unreported:
            (answered if slot.done.done() and not slot.deferred else waiting).append(slot)
        self._unreported = waiting
        exchange = self._exchange(request, refused, [self._reply(s) for s in answered])
        self.exchanges.append(exchange)
        return SubCallReply(results=exchange.replies if not refused else
                            tuple(exchange.answer()))

    def _accept(self, calls: tuple[SubCall, ...]) -> list[SubCallOutcome]:
        """Number and start the calls of a live exchange; the refused ones' replies."""
        refused: list[SubCallOutcome] = []
        for wire_call in calls:
            if self._run_signal.aborted:   # the run is over (`drain`): refused unnumbered, unlogged
                refused.append(SubCallErr(id=wire_call.id, code="ABORTED",
                                                   message=RUN_OVER_MESSAGE))
            elif wire_call.id in self._by_guest_id or (
                    self._held and any(h.id == wire_call.id for h, _ in self._held)):
                refused.append(SubCallErr(
                    id=wire_call.id, code="TOOL_ERROR",
                    message=f"sub-call id {wire_call.id} was already used"))
            else:
                self._start_live(wire_call, self._next_n())
        return refused

    def _next_n(self) -> int:
        return len(self._by_guest_id) + len(self._held) + 1

    async def _wait(self, request: SubCallBatch,
                    refused: list[SubCallOutcome]) -> None:
        """Until a call the program waits for is answerable, `wait_s` passes, or the run
        must pause: the program has no timer of its own (`indefinite`), every call it waits
        for is deferred, and no other call is still running (its outcome is recorded
        first, so the replay can answer it). A program with a timer pending is not paused:
        it wakes up by itself and may go on without the deferred calls."""
        wanted = None if request.until is None else set(request.until)
        targets = [s for s in self._unreported if wanted is None or s.sub.guest_id in wanted]
        if not targets or not (request.wait_s or 0) > 0 or any(
                s.done.done() and not s.deferred for s in targets):
            return                    # (the usual call that settled at once: no clock read)
        deadline = self._loop.time() + (request.wait_s or 0)
        while True:
            if any(s.done.done() and not s.deferred for s in targets):
                return
            running = [s.done for s in targets if not s.done.done()] or \
                [s.done for s in self._unreported if not s.done.done()]
            if not running and request.indefinite:
                self._pause(request, refused)
            if not running:
                running = [self._loop.create_future()]    # nothing can settle: wait_s out
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                return
            await asyncio.wait(running, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)

    def _pause(self, request: SubCallBatch, refused: list[SubCallOutcome]) -> None:
        """Stop the run here: record this exchange (unanswered) and the calls waiting.

        Raises:
            PauseRun: always.
        """
        self.paused = [s for s in self._unreported if s.deferred]
        self.exchanges.append(self._exchange(request, refused, []))
        self._settled_at_pause = [self._reply(s) for s in self._unreported
                                  if s.done.done() and not s.deferred]
        raise PauseRun(f"waiting for approval of {len(self.paused)} tool call"
                       f"{'s' if len(self.paused) != 1 else ''}")

    def _exchange(self, request: SubCallBatch, refused: list[SubCallOutcome],
                  replies: list[SubCallOutcome]) -> Exchange:
        calls = tuple(RecordedCall(id=c.id, name=c.name, args=bytes(c.args).decode(),
                                   invalid=c.invalid) for c in request.calls)
        return Exchange(calls=calls, cancel=tuple(request.cancel), refused=tuple(refused),
                        replies=tuple(replies))

    def run_record(self, code: str, limits: SandboxLimits, tape: Tape | None) -> RunRecord:
        """The record of a run that paused (after `PauseRun`)."""
        settled_by = {str(guest_id): slot.answered_by
                      for guest_id, slot in self._by_guest_id.items()
                      if not slot.deferred and slot.done.done()}
        grants = self._approvals.grants
        return RunRecord(code=code, limits=limits, exchanges=tuple(self.exchanges),
                         settled=tuple(self._settled_at_pause), settled_by=settled_by,
                         tape=tape, plan_approval=grants.approval, plan_used=grants.used)

    def requests(self) -> tuple[PendingApproval, ...]:
        """The approvals a paused run waits on, in call order; ids `"<run id>:<n>"`."""
        return tuple(
            PendingApproval(id=f"{self.run_id}:{s.sub.n}", tool_name=s.sub.name,
                            arguments=s.sub.arguments,
                            reason=s.reason if s.reason is not None else msgspec.UNSET)
            for s in sorted(self.paused, key=lambda s: s.sub.n))

    # ---- live calls --------------------------------------------------------------------

    def _sub_call(self, wire_call: SubCall, n: int) -> _SubCall:
        arguments = wire_call.arguments            # decoded by the host, once
        try:     # frozen: the classifier, the pipeline and the log all read this one copy
            arguments = snapshot(arguments, what="arguments")
        except NotLosslessError:     # S3 refuses it, with the pipeline's own message
            pass
        return _SubCall(guest_id=wire_call.id, n=n,
                        sub_call_id=f"{self._outer.execution.call_id}:code:{n}",
                        name=wire_call.name, arguments=arguments,
                        invalid=wire_call.invalid or _reserved_reason(arguments),
                        signal=Signal.any(self._run_signal))

    def _start_live(self, wire_call: SubCall, n: int) -> None:
        answer = self._host_answered.get(wire_call.name)
        if answer is not None:
            self._answer_now(wire_call, n, answer(wire_call))
            return
        earlier = self._earlier.pop(n, None)
        if earlier is not None and earlier.fits(wire_call):   # ran before a crash: not again
            self._answer_from_log(wire_call, n, msgspec.structs.replace(
                earlier.reply, id=wire_call.id), earlier.sub_call_id)
            return
        outer = self._outer.execution
        sub = self._sub_call(wire_call, n)
        inp = ExecutionInput(
            call_id=sub.sub_call_id, name=sub.name, arguments=sub.arguments, signal=sub.signal,
            root_call_id=outer.root_call_id, agent=outer.agent, parent=outer.token,
            reachable=self._reachable, argument_error=sub.invalid, approval=self._approvals,
            idempotency_key=f"{self.run_id}:{n}")
        call = self._scheduler.submit(inp, data=sub, start=False)    # `_serve` starts them
        slot = _Slot(sub=sub, done=call.done, scheduled=call, answered_by=sub.sub_call_id)
        self._by_guest_id[sub.guest_id] = slot
        self._by_sub_call_id[sub.sub_call_id] = slot
        self._unreported.append(slot)

    def _answer_now(self, wire_call: SubCall, n: int, answer: SubCallOutcome) -> None:
        """Call `n`, of a host-answered function, answered with `answer`: no tool runs,
        nothing of it goes through the pipeline; the run's record keeps it (for a replay),
        the log has it as a `tool/code-lookup` event and, for a discovery call, the run's
        value counts it (`SubCallSummary.discovery`)."""
        sub = self._sub_call(wire_call, n)
        if self._logging:
            outer = self._outer.execution
            failed = answer.code if isinstance(answer, SubCallErr) else msgspec.UNSET
            self._session.log.append(events.CodeLookup(
                root_call_id=outer.root_call_id, parent_call_id=outer.call_id,
                sub_call_id=sub.sub_call_id, name=sub.name, arguments=sub.arguments,
                is_error=isinstance(answer, SubCallErr), code=failed))
        done: asyncio.Future[None] = self._loop.create_future()
        done.set_result(None)
        slot = _Slot(sub=sub, done=done, reply=answer, answered_by=sub.sub_call_id)
        self._by_guest_id[sub.guest_id] = slot
        self._unreported.append(slot)
        self._count(sub.name, None)

    def _exclusive(self, call: Scheduled) -> bool:
        """Concurrency-safe only by the tool's own classifier; an unexposed name or a call
        of the wrong shape is exclusive (docs/pipeline-spec.md §2 S0)."""
        sub: _SubCall = call.data
        return sub.name not in self._exposed or sub.invalid is not None or \
            self._session.classify(sub.name, sub.arguments,
                                   self._outer.execution.agent) == "exclusive"

    # ---- the sub-call's own events -----------------------------------------------------

    def _log_start(self, call: Scheduled) -> None:
        if not self._logging:
            return
        sub: _SubCall = call.data
        outer = self._outer.execution
        self._session.log.append(events.CodeDispatchStart(
            root_call_id=outer.root_call_id, parent_call_id=outer.call_id,
            sub_call_id=sub.sub_call_id, name=sub.name, arguments=sub.arguments))

    async def _commit(self, call: Scheduled) -> None:
        result = call.result
        assert result is not None
        call.data.signal.detach()    # settled: the run scope need not reach it any more
        execution = call.pending.execution if call.pending is not None else None
        # The durable copy goes through the `tools/code-dispatch-log` waterfall.
        content = await self._session.code_dispatch_content(execution, result)
        self._log_settle(call, result, content)
        sub: _SubCall = call.data
        code = rejection_code(result) if result.is_error else None
        if code == "APPROVAL_PENDING":     # not answered: the run pauses when it waits for it
            self._by_guest_id[sub.guest_id].deferred = True
            return
        for context in result.additional_contexts:    # deferred past the outer result
            self._outer.defer_context(context)
        if not result.is_error and not _all_text(result.content):
            # The model never sees a sub-call's result, so an image (audio, a resource) in
            # it would be lost: it follows the outer result as one more user message
            # (docs/pipeline-spec.md §8.3).
            self._outer.defer_context(list(result.content))
        if result.concludes_turn:
            self._outer.conclude_turn()
        self._count(sub.name, code)

    def _count(self, name: str, code: str | None) -> None:
        if name in self._host_answered:
            shown = DISCOVERY_NAMES.get(name)
            if shown is not None:
                self.summary.discovery[shown] = self.summary.discovery.get(shown, 0) + 1
            return
        self.summary.total += 1
        self.summary.by_tool[name] = self.summary.by_tool.get(name, 0) + 1
        if code is not None:
            self.summary.failed += 1
            if code == "DENIED":
                self.summary.denied += 1

    def _log_settle(self, call: Scheduled, result: CallResult, content: tuple[Any, ...]) -> None:
        if not self._logging:
            return
        sub: _SubCall = call.data
        outer = self._outer.execution
        code = rejection_code(result) if result.is_error else msgspec.UNSET
        answer: Any = msgspec.UNSET
        if self._resumed and code != "APPROVAL_PENDING":
            answer = sealed_answer(self._seal, self.run_id, sub.sub_call_id, sub.name,
                                   sub.arguments,
                                   _answer_of(sub.guest_id, result, _body_ran(call),
                                              self._tagged(sub)))
        self._session.log.append(events.CodeDispatch(
            root_call_id=outer.root_call_id, parent_call_id=outer.call_id,
            sub_call_id=sub.sub_call_id, name=sub.name, arguments=sub.arguments,
            is_error=result.is_error, content=content, code=code, answer=answer,
            traceback=(result.error.traceback if result.error is not None
                       and result.error.traceback is not None else msgspec.UNSET)))

    def _reply(self, slot: _Slot) -> SubCallOutcome:
        if slot.reply is not None:
            return slot.reply
        guest_id = slot.sub.guest_id
        call = slot.scheduled
        assert call is not None
        result = call.result
        if result is None:
            return SubCallErr(id=guest_id, code="TOOL_ERROR", ran=_body_ran(call),
                              message=f"sub-call failed in the host: {call.error}")
        return _answer_of(guest_id, result, _body_ran(call), self._tagged(slot.sub))

    def _tagged(self, sub: _SubCall) -> bool:
        """The tool's values are already in the wire's tagged form (`tagged.mark_tagged`)."""
        definition = self._session.resolve(sub.name, self._outer.execution.agent)
        return definition is not None and is_tagged(definition.execute)

    async def drain(self) -> None:
        """After the run settled: abort the run scope, drop calls that never started, and
        await the ones in flight and their commits (docs/pipeline-spec.md §11.3 step 4).

        A tool that ignores the abort cannot hold the run past its limit: a call still
        unsettled `ABANDON_AFTER_S` seconds later is abandoned. Nobody knows whether it
        will take effect, so it is committed as `TOOL_OUTCOME_UNKNOWN` through the
        pipeline (the finalizer and `tools/result` run for it, as after crash repair) and
        logged; its body is left to finish on its own, its result discarded."""
        self._run_signal.abort("settled")
        self._dispose_guard()
        hanging = await self._scheduler.drain(
            abandon_after_s=ABANDON_AFTER_S,
            abandon_error=lambda: OutcomeUnknownError(ABANDONED_MESSAGE))
        for call in hanging:              # even its commit hangs (a log listener): log it anyway
            if call.state is not CallState.QUEUED:
                result = call.result or CallResult.failure(
                    ABANDONED_MESSAGE, code="TOOL_OUTCOME_UNKNOWN", name="ToolOutcomeUnknown")
                self._log_settle(call, result, tuple(result.content))


def _reserved_reason(arguments: Any) -> str | None:
    """Why the arguments are refused when a top-level name is a parent-token field (the
    first such name, sorted), else None."""
    if not isinstance(arguments, dict) or RESERVED_ARGUMENTS.isdisjoint(arguments):
        return None
    reserved = sorted(k for k in arguments if k in RESERVED_ARGUMENTS)
    if not reserved:
        return None
    return (f'"{reserved[0]}" is reserved for the host (it sets the parent token of every '
            "sub-call)")


def _body_ran(call: Scheduled) -> bool:
    """Whether the tool's body of `call` was entered (the pipeline's own record of it): a
    failure after that may carry the tool's data, so it brings the tool's labels."""
    return call.pending is not None and call.pending.body_invoked
