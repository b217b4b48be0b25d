"""What a paused run leaves in the log, and how a resumed run is checked against it
(docs/codemode.md "Pausing for approval").

A run is recorded as the sequence of its `dispatch` exchanges with the sandbox: what the
program sent (the calls with their JSON arguments, the cancellations) and what it was
answered. The sandbox records what the program read from clocks and randomness (its
`Tape`). Replaying the same program in a fresh instance with the same answers, in the same
order, and the same tape makes it do the same thing, so a resumed run answers every
exchange the first run completed from the record, checks that the program asks for the
same calls at the same positions, and goes live at the exchange where the run paused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from codemode.pipeline import HarnessError, events
from codemode.sandbox import SandboxLimits, SubCall, SubCallOutcome, Tape

from .approval_record import PlanApproval
from .seal import ResumeTampered, SealKey


class RecordedCall(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One sub-call as the program sent it.

    Attributes:
        id: the program's id for it (its binding numbers calls in order).
        name: the tool name called.
        args: the JSON text of its arguments, as the program encoded them.
        invalid: why the program found it did not fit the tool's signature, if it did.
    """

    id: int
    name: str
    args: str
    invalid: str | None = None


class Exchange(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One `dispatch` from the program: what it sent and what it was answered: `refused`
    (calls refused unnumbered: a reused id, a run already over), then `replies` (outcomes
    of calls). Empty fields are left out of the JSON (a program may poll many times)."""

    calls: tuple[RecordedCall, ...] = ()
    cancel: tuple[int, ...] = ()
    refused: tuple[SubCallOutcome, ...] = ()
    replies: tuple[SubCallOutcome, ...] = ()

    def answer(self) -> list[SubCallOutcome]:
        """The reply the program got, in order."""
        return [*self.refused, *self.replies]


class RunRecord(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a resumed run needs (the `state` of `tool/suspended`).

    Attributes:
        code: the program.
        limits: the limits it ran under (a resumed run keeps them).
        exchanges: the run's exchanges in order; the last is the one it paused in, with no
            replies.
        settled: outcomes of calls that settled before the pause but were not answered yet.
        settled_by: for each settled call (by the program's id, as text: JSON object keys
            are strings), the sub-call whose `tool/code-dispatch` holds its result (the
            first run's, for a replayed call).
        tape: what the program read from clocks and randomness (None: not recorded).
        plan_approval: the plan approval the run follows (None: none); its entries not in
            `plan_used` still answer the resumed run's calls (`plan_approval.Grants`).
        plan_used: the numbers of the approval's entries the run used before it paused.
    """

    code: str
    limits: SandboxLimits
    exchanges: tuple[Exchange, ...]
    settled: tuple[SubCallOutcome, ...] = ()
    settled_by: dict[str, str] = {}
    tape: Tape | None = None
    plan_approval: PlanApproval | None = None
    plan_used: tuple[int, ...] = ()

    def answers(self) -> dict[int, SubCallOutcome]:
        """Every recorded outcome by the program's call id."""
        found = {r.id: r for exchange in self.exchanges for r in exchange.replies}
        found.update((r.id, r) for r in self.settled)
        return found


class ReplayDiverged(HarnessError):
    """A resumed program did not repeat what the first run did: it asked for another call
    (another tool or other arguments) than the log holds at that position, or read clocks or
    randomness in another order. The resumed run stops there; no tool runs."""

    code = "REPLAY_DIVERGED"


def describe(call: RecordedCall | SubCall) -> str:
    """`name(<args JSON>)`, arguments cut at 200 characters."""
    args = call.args if isinstance(call.args, str) else bytes(call.args).decode()
    if len(args) > 200:
        args = args[:200] + "..."
    return f"{call.name}({args})"


def divergence(position: int, sent: Sequence[SubCall], cancel: Sequence[int],
               recorded: Exchange, first_n: int) -> str | None:
    """Why the program's exchange number `position` (from 1) differs from `recorded`, or
    None when it asks for the same calls, in the same order, with the same arguments (the
    same JSON text: `1` and `true` differ) and cancels the same ones. `first_n` numbers
    its first call."""
    for offset, (call, want) in enumerate(zip(sent, recorded.calls, strict=False)):
        same_args = bytes(call.args) == want.args.encode()
        if call.id != want.id or call.name != want.name or not same_args \
                or (call.invalid or None) != (want.invalid or None):
            return (f"sub-call {first_n + offset}: the program called {describe(call)} where "
                    f"the log holds {describe(want)}")
    if len(sent) > len(recorded.calls):
        extra = sent[len(recorded.calls)]
        return (f"sub-call {first_n + len(recorded.calls)}: the program called "
                f"{describe(extra)}, a call the log does not hold at that position "
                f"(exchange {position})")
    if len(sent) < len(recorded.calls):
        missing = recorded.calls[len(sent)]
        return (f"sub-call {first_n + len(sent)}: the log holds {describe(missing)}, which "
                f"the program did not call at that position (exchange {position})")
    if tuple(cancel) != recorded.cancel:
        return (f"exchange {position}: the program cancelled calls {sorted(cancel)} where the "
                f"log holds {sorted(recorded.cancel)}")
    return None


class EarlierAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """A sub-call that a resumption which then crashed ran and settled: the next
    resumption answers the same call (same number, tool and arguments) with `reply`
    instead of running it again (its idempotency key is the same)."""

    sub_call_id: str
    name: str
    arguments: Any
    reply: SubCallOutcome

    def fits(self, call: SubCall) -> bool:
        """`call` is this one: the same tool and the same arguments (as JSON)."""
        try:
            sent = msgspec.json.encode(msgspec.json.decode(bytes(call.args)))
        except (msgspec.DecodeError, RecursionError):
            return False
        return call.name == self.name and sent == msgspec.json.encode(self.arguments)


def _answer_name(sub_call_id: str, tool: str) -> str:
    """What an answer's seal binds besides the run and the arguments: the call (its sub-call
    id, which holds the resuming call and its number) and the tool it called."""
    return f"answer {sub_call_id} of {tool}"


def sealed_answer(seal: SealKey | None, run_id: str, sub_call_id: str, tool: str,
                  arguments: Any, reply: SubCallOutcome) -> dict[str, Any]:
    """What `tool/code-dispatch` keeps as `answer` for a resumed run's live call: `{"reply":
    ..., "seal": ...}`, sealed like a paused run's record over the run, the call (sub-call
    id and number), the tool and the arguments (`_answer_name`), so that a later
    resumption trusts only answers `run_code` wrote, each for the very call it answered (a
    log writer cannot move one to another call or another tool). Without a key (a
    dispatcher made by hand) it is not sealed."""
    state = {"reply": msgspec.to_builtins(reply)}
    if seal is None:
        return state
    return seal.sealed(run_id=run_id, name=_answer_name(sub_call_id, tool), arguments=arguments,
                       requests=(), state=state, agent=None)


def answer_holds(seal: SealKey, run_id: str, settle: events.CodeDispatch) -> bool:
    """Whether the answer `settle` keeps (`sealed_answer`) is the one `run_code` wrote for
    that very call of `run_id`: its sub-call, tool and arguments.

    Raises:
        SealKeyError: the key cannot be used."""
    try:
        seal.check(run_id=run_id, name=_answer_name(settle.sub_call_id, settle.name),
                   arguments=settle.arguments, requests=(), state=settle.answer, agent=None)
    except ResumeTampered:
        return False
    return True


def earlier_answers(log: Sequence[events.Event], run_id: str, attempts: Sequence[str],
                    seal: SealKey) -> dict[int, EarlierAnswer]:
    """By sub-call number, the live answers of `attempts` (the resumptions that used the
    same record before this one went live: `resumptions.uses_of`, from sealed markers
    only); a later attempt's answer wins. Only an answer whose seal holds
    (`sealed_answer`) counts, and its number is read from its own sealed sub-call id: that
    call runs again otherwise."""
    order = {attempt: i for i, attempt in enumerate(attempts)}
    settled: list[tuple[int, int, events.CodeDispatch]] = []
    for event in log:
        if not (isinstance(event, events.CodeDispatch) and isinstance(event.answer, dict)):
            continue
        attempt, _, number = event.sub_call_id.rpartition(":code:")
        if attempt in order and number.isdigit() and event.parent_call_id == attempt:
            settled.append((order[attempt], int(number), event))
    found: dict[int, EarlierAnswer] = {}
    for _, n, settle in sorted(settled, key=lambda item: item[0]):
        answer = settle.answer
        if not isinstance(answer, dict) or not answer_holds(seal, run_id, settle):
            continue                        # not an answer run_code wrote for this call
        try:
            reply = msgspec.convert(answer.get("reply"), SubCallOutcome)
        except msgspec.ValidationError:
            continue
        found[n] = EarlierAnswer(sub_call_id=settle.sub_call_id, name=settle.name,
                                      arguments=settle.arguments, reply=reply)
    return found
