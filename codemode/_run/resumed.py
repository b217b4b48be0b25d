"""Serving a resumed run from the record of the paused one (docs/codemode.md "Pausing for
approval"; the record and its checks: `replay`).

A resumed run is given the paused run's record and the decisions on its requests
(`Replay`). Its dispatcher answers every exchange the paused run completed from the record
(`tool/code-replayed`, no tool runs), stops with `REPLAY_DIVERGED` when the program asks for
anything else, and goes live at the exchange where the run paused, once each call held
there is checked against the request a person decided on. `Replaying` is that part of
`SubCallDispatcher`, kept apart from the live calls (`dispatch`) that it hands over to.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from codemode.pipeline import (
    ApprovalDecision,
    PendingApproval,
    Resumption,
    RunContext,
    Session,
    events,
)
from codemode.sandbox import SubCall, SubCallBatch, SubCallErr, SubCallOutcome, SubCallReply

from .approvals import _RunApprovals
from .discovery import DISCOVERY_NAMES
from .replay import EarlierAnswer, Exchange, ReplayDiverged, RunRecord, describe, divergence
from .resumptions import record_seal, went_live
from .seal import SealKey
from .subcalls import _Slot, _SubCall


@dataclass
class Replay:
    """A resumed run's inputs: the paused run's record and the decisions on its requests.

    Attributes:
        record: what the paused run recorded.
        decisions: by request id (`"<run id>:<n>"`), each used once.
        requests: what each request showed the person (the tool and its arguments): a
            decision applies only to the call it was shown for.
        earlier: by sub-call number, what earlier resumptions that crashed ran and settled
            (`replay.earlier_answers`): the same call is answered from the log, not run.
        record_seal: the seal of the record (`resumptions.record_seal`), which the marker
            logged when the run goes live names.
    """

    record: RunRecord
    decisions: dict[str, ApprovalDecision]
    requests: dict[str, PendingApproval]
    earlier: dict[int, EarlierAnswer] = field(default_factory=dict)
    record_seal: str = ""


class Replaying:
    """The replay of a paused run, as part of `SubCallDispatcher` (which sets the state
    below and serves each batch: from the record while it lasts, then live)."""

    run_id: str
    exchanges: list[Exchange]
    diverged: str | None
    went_live: bool
    _session: Session
    _outer: RunContext
    _loop: asyncio.AbstractEventLoop
    _logging: bool
    _replay: Replay | None
    _answers: dict[int, SubCallOutcome]
    _held: list[tuple[SubCall, int]]
    _by_guest_id: dict[int, _Slot]
    _unreported: list[_Slot]
    _approvals: _RunApprovals
    _denied: dict[str, str]
    _seal: SealKey | None

    if TYPE_CHECKING:       # the live calls' side, in `SubCallDispatcher`
        def _next_n(self) -> int: ...
        def _sub_call(self, wire_call: SubCall, n: int) -> _SubCall: ...
        def _count(self, name: str, code: str | None) -> None: ...
        def _start_live(self, wire_call: SubCall, n: int) -> None: ...

    def _check_replay(self, request: SubCallBatch, recorded: Exchange) -> None:
        """Raises:
            ReplayDiverged: the program's exchange differs from the recorded one."""
        why = divergence(len(self.exchanges) + 1, request.calls, request.cancel, recorded,
                         self._next_n())
        if why is not None:
            self._diverge(why)

    def _diverge(self, why: str) -> None:
        """Raises:
            ReplayDiverged: always, after noting `why` for the run's result."""
        self.diverged = why
        raise ReplayDiverged(f"replay diverged at {why}; no tool ran")

    def _replay_exchange(self, request: SubCallBatch, recorded: Exchange) -> SubCallReply:
        """Answer an exchange the paused run completed, from its record."""
        for wire_call in request.calls:
            self._take_recorded(wire_call)
        for reply in recorded.replies:
            slot = self._by_guest_id.get(reply.id)
            if slot is not None and slot in self._unreported:
                self._unreported.remove(slot)
        self.exchanges.append(recorded)
        return SubCallReply(results=tuple(recorded.answer()))

    def _take_recorded(self, wire_call: SubCall) -> SubCallOutcome | None:
        """A replayed call: answered from the record if it settled, else held until the
        replay reaches the exchange the run paused in (a call waiting for approval). A
        reused id is refused unnumbered, as the first run refused it: its refusal."""
        if wire_call.id in self._by_guest_id or any(h.id == wire_call.id for h, _ in self._held):
            return SubCallErr(id=wire_call.id, code="TOOL_ERROR",
                                       message=f"sub-call id {wire_call.id} was already used")
        n = self._next_n()
        answer = self._answers.get(wire_call.id)
        if answer is None:
            self._held.append((wire_call, n))
            return None
        replayed_from = self._replay.record.settled_by.get(str(wire_call.id), "") \
            if self._replay is not None else ""
        self._answer_from_log(wire_call, n, answer, replayed_from)
        return None

    def _answer_from_log(self, wire_call: SubCall, n: int, answer: SubCallOutcome,
                         replayed_from: str) -> None:
        """Call `n` is answered with `answer` without running (`tool/code-replayed`)."""
        sub = self._sub_call(wire_call, n)
        done: asyncio.Future[None] = self._loop.create_future()
        done.set_result(None)
        slot = _Slot(sub=sub, done=done, reply=answer, answered_by=replayed_from)
        self._by_guest_id[sub.guest_id] = slot
        self._unreported.append(slot)
        self._count(sub.name, answer.code if isinstance(answer, SubCallErr) else None)
        if self._logging and sub.name not in DISCOVERY_NAMES:   # no tool: nothing replayed
            outer = self._outer.execution
            self._session.log.append(events.CodeReplayed(
                root_call_id=outer.root_call_id, parent_call_id=outer.call_id,
                sub_call_id=sub.sub_call_id, name=sub.name, arguments=sub.arguments,
                replayed_from=replayed_from or sub.sub_call_id))

    def _go_live(self, request: SubCallBatch,
                 recorded: Exchange) -> list[SubCallOutcome]:
        """The exchange the paused run stopped in: its settled calls are answered from the
        record; the held calls run live, in call order, once each is checked against the
        request the person decided on (the same tool and arguments). Returns the refusals
        of reused ids.

        Raises:
            ReplayDiverged: a held call is not the one a request showed, or a request has
                no call here.
        """
        assert self._replay is not None
        refused = [r for r in map(self._take_recorded, request.calls) if r is not None]
        requests = dict(self._replay.requests)
        for wire_call, n in self._held:
            why = _not_as_shown(wire_call, requests.pop(f"{self.run_id}:{n}", None))
            if why is not None:
                self._diverge(f"sub-call {n}: the program called {describe(wire_call)}, {why}")
        if requests:
            self._diverge(f"the paused run's request {next(iter(requests))} has no call "
                          "where the run paused")
        held, self._held = self._held, []
        self._mark_live(self._replay)
        self._replay = None
        self.went_live = True
        for wire_call, n in held:
            decision = self._approvals.decision_for(f"{self.run_id}:{n}")
            if decision is not None and not decision.approved:
                because = f": {decision.reason}" if isinstance(decision.reason, str) else ""
                self._denied[f"{self._outer.execution.call_id}:code:{n}"] = (
                    f'the user rejected tool "{wire_call.name}"{because}')
            self._start_live(wire_call, n)
        return refused


    def _mark_live(self, replay: Replay) -> None:
        """Log `tool/code-resumed` before any approved call starts: from then on the record
        is used (`resumptions`)."""
        if not self._logging or self._seal is None or not replay.record_seal:
            return
        outer = self._outer.execution
        self._session.log.append(went_live(
            self._seal, root_call_id=outer.root_call_id, call_id=outer.call_id,
            run_id=self.run_id, record=replay.record_seal,
            decisions=tuple(replay.decisions.values())))


def _not_as_shown(call: SubCall, shown: PendingApproval | None) -> str | None:
    """How `call` differs from the request a person decided on (tool, arguments as JSON),
    or None when it is that call."""
    if shown is None:
        return "which no request of the paused run showed"
    arguments = msgspec.json.encode(shown.arguments)
    if shown.tool_name != call.name or msgspec.json.encode(call.arguments) != arguments:
        return f"where the request {shown.id} showed {shown.tool_name}({arguments.decode()})"
    return None


def replay_of(resumption: Resumption | None, code: str,
               earlier: dict[int, EarlierAnswer] | None = None) -> Replay | None:
    """The replay a resumption asks for, its state checked: a state that does not decode,
    or holds another program than the call's `code`, is refused. `earlier`: what
    resumptions that crashed already settled (`Replay.earlier`)."""
    if resumption is None:
        return None
    try:
        record = msgspec.convert(resumption.state, RunRecord)
    except msgspec.ValidationError as exc:
        raise ReplayDiverged(f"the paused run's record cannot be read: {exc}") from None
    if record.code != code:
        raise ReplayDiverged("the paused run's record holds another program than its call")
    return Replay(record=record, decisions={d.id: d for d in resumption.decisions},
                  requests={r.id: r for r in resumption.requests}, earlier=earlier or {},
                  record_seal=record_seal(resumption.state))
