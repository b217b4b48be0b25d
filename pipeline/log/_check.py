"""The log's invariants (docs/pipeline-spec.md §10), checked over a whole log or one append at a
time.

``check(events)`` returns every violation, in log order; ``LogChecker`` is the same check
fed one event at a time, which is how an open log refuses the appends no writer may make
(``REFUSED``, raised as ``LogInvariantError``).

The invariants:

- ``seq`` numbers the events 1, 2, 3, ... (``SEQ_OUT_OF_ORDER``);
- turns and steps nest: a turn opens while none is open, a step inside an open turn, and
  each end closes what is open (``TURN_ALREADY_OPEN``, ``STEP_ALREADY_OPEN`` for a step
  number opened twice, ``NO_OPEN_TURN``, ``NO_OPEN_STEP``). Steps of one turn may overlap
  (concurrent batches on one session); each event names its step; a turn ends with every
  step of it ended (``UNCLOSED_STEP``);
- ``tool/call`` and ``tool/result`` sit inside the open step they name, of the open turn
  (``NO_OPEN_STEP``); a ``tool/result`` answers a ``tool/call`` of that step still waiting
  for one (``RESULT_WITHOUT_CALL``; crash repair may answer a call block that has no
  ``tool/call`` only with ``TOOL_NOT_STARTED``); a step or turn ends with every call of the
  step answered (``UNANSWERED_CALL``); a call id is not reused while it waits
  (``DUPLICATE_CALL``);
- call ids and sub-call ids are non-empty (``EMPTY_ID``); a ``tool/call`` may carry the
  empty name a model sent and a dispatch event the empty name a program sent, each
  answered as a failed call;
- dispatch events sit inside an open turn (``DISPATCH_OUTSIDE_TURN``); a sub-call starts
  once (``DUPLICATE_SUB_CALL``), settles once and only after it started
  (``SETTLE_WITHOUT_START``), keeps its root (``ROOT_CHANGED``), and its ``parentCallId``
  is its root or a sub-call already started under that root (``UNKNOWN_PARENT``); a turn
  ends with every sub-call started in it settled (``UNSETTLED_SUB_CALL``);
- a ``tool/code-replayed``, ``tool/code-resumed`` or ``tool/code-approval-used`` sits
  inside an open turn (``DISPATCH_OUTSIDE_TURN``) with non-empty ids (``EMPTY_ID``); its
  seal is the tool's to check, not the log's;
- a ``tool/resumed`` consumes the latest ``tool/suspended`` of its run id, once
  (``RESUME_WITHOUT_SUSPEND``: none, or that suspension was already resumed); a resuming
  call that crash repair answered ``TOOL_OUTCOME_UNKNOWN`` gives it back;
- a complete log (``complete=True``, the default) ends with no turn open
  (``UNCLOSED_TURN``, and the calls and sub-calls still open are reported too). A log
  that is still being written, or that crashed and was not reopened, is checked with
  ``complete=False``.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable

import msgspec

from ..events import (
    CodeApprovalUsed,
    CodeDispatch,
    CodeDispatchStart,
    CodeLookup,
    CodeReplayed,
    CodeResumed,
    Event,
    StepEnd,
    StepStart,
    ToolCall,
    ToolResult,
    ToolResumed,
    ToolSuspended,
    TurnEnd,
    TurnStart,
)

__all__ = ["REFUSED", "LogChecker", "Violation", "ViolationKind", "check"]


class ViolationKind(str, enum.Enum):  # noqa: UP042  (str() stays the member's name)
    """What is wrong (the module docstring says when each is reported). Stable names."""

    SEQ_OUT_OF_ORDER = "SEQ_OUT_OF_ORDER"
    TURN_ALREADY_OPEN = "TURN_ALREADY_OPEN"
    STEP_ALREADY_OPEN = "STEP_ALREADY_OPEN"
    NO_OPEN_TURN = "NO_OPEN_TURN"
    NO_OPEN_STEP = "NO_OPEN_STEP"
    EMPTY_ID = "EMPTY_ID"
    DUPLICATE_CALL = "DUPLICATE_CALL"
    RESULT_WITHOUT_CALL = "RESULT_WITHOUT_CALL"
    UNANSWERED_CALL = "UNANSWERED_CALL"
    DISPATCH_OUTSIDE_TURN = "DISPATCH_OUTSIDE_TURN"
    DUPLICATE_SUB_CALL = "DUPLICATE_SUB_CALL"
    SETTLE_WITHOUT_START = "SETTLE_WITHOUT_START"
    ROOT_CHANGED = "ROOT_CHANGED"
    UNKNOWN_PARENT = "UNKNOWN_PARENT"
    UNSETTLED_SUB_CALL = "UNSETTLED_SUB_CALL"
    UNCLOSED_TURN = "UNCLOSED_TURN"
    RESUME_WITHOUT_SUSPEND = "RESUME_WITHOUT_SUSPEND"
    UNCLOSED_STEP = "UNCLOSED_STEP"


#: Violations an open log refuses to append (``LogInvariantError``): no writer makes them
#: unless it is broken, and once written no reader can make sense of them.
REFUSED = frozenset(
    {
        ViolationKind.EMPTY_ID,
        ViolationKind.RESULT_WITHOUT_CALL,
        ViolationKind.DISPATCH_OUTSIDE_TURN,
        ViolationKind.DUPLICATE_SUB_CALL,
        ViolationKind.SETTLE_WITHOUT_START,
        ViolationKind.ROOT_CHANGED,
        ViolationKind.UNKNOWN_PARENT,
        ViolationKind.RESUME_WITHOUT_SUSPEND,
    }
)


class Violation(msgspec.Struct, frozen=True, kw_only=True):
    """One broken invariant: ``kind``, the ``seq`` of the event that broke it (for what is
    still open at the end of a complete log: the event that opened it), and a sentence."""

    kind: ViolationKind
    seq: int
    message: str


class LogChecker:
    """The invariants, one event at a time: ``violations(event)`` says what appending it
    would break without changing anything; ``apply(event)`` takes it in; ``feed`` does
    both; ``finish()`` reports what a complete log must not leave open."""

    def __init__(self) -> None:
        self._seq = 0
        self._turn: TurnStart | None = None
        self._steps: dict[int, Counter[str]] = {}  # open step -> call ids waiting
        self._roots: dict[str, str] = {}  # sub-call id -> its root
        self._running: dict[str, CodeDispatchStart] = {}  # started, not settled
        self._turn_starts: list[str] = []  # sub-calls started in the open turn
        self._suspended: set[str] = set()  # run ids whose latest suspension awaits resume
        self._resuming: dict[str, str] = {}  # resuming call id -> its run id

    def feed(self, event: Event) -> list[Violation]:
        found = self.violations(event)
        self.apply(event)
        return found

    def violations(self, event: Event) -> list[Violation]:
        cls = type(event)
        if (cls is CodeDispatchStart or cls is CodeDispatch) \
                and event.seq == self._seq + 1:   # a run's many sub-calls: straight there
            return self._dispatch_violations(event)  # type: ignore[arg-type]
        kind = _kind(event)
        found: list[Violation] = []

        def add(kind: ViolationKind, message: str) -> None:
            found.append(Violation(kind=kind, seq=event.seq, message=message))

        if event.seq != self._seq + 1:
            add(ViolationKind.SEQ_OUT_OF_ORDER, f"seq {event.seq} follows seq {self._seq}")
        if kind is TurnStart and isinstance(event, TurnStart):
            if self._turn is not None:
                add(
                    ViolationKind.TURN_ALREADY_OPEN,
                    f"turn {event.turn} starts while turn {self._turn.turn} is open",
                )
        elif kind is TurnEnd and isinstance(event, TurnEnd):
            if self._turn is None:
                add(ViolationKind.NO_OPEN_TURN, f"turn {event.turn} ends but no turn is open")
            found.extend(self._left_open(event.seq, "ends"))
        elif kind is StepStart and isinstance(event, StepStart):
            if self._turn is None or event.turn != self._turn.turn:
                add(
                    ViolationKind.NO_OPEN_TURN,
                    f"step {event.step} starts outside its turn {event.turn}",
                )
            elif event.step in self._steps:
                add(
                    ViolationKind.STEP_ALREADY_OPEN,
                    f"step {event.step} starts again while it is open",
                )
        elif kind is StepEnd and isinstance(event, StepEnd):
            waiting = self._open_step(event.turn, event.step)
            if waiting is None:
                add(ViolationKind.NO_OPEN_STEP, f"step {event.step} ends but is not open")
            for call_id in waiting or ():
                add(
                    ViolationKind.UNANSWERED_CALL,
                    f"step {event.step} ends before tool call {call_id!r} has a result",
                )
        elif kind is ToolCall and isinstance(event, ToolCall):
            waiting = self._open_step(event.turn, event.step)
            if not event.call_id:  # an empty *name* is the model's malformed call, answered as such
                add(ViolationKind.EMPTY_ID, "a tool/call has an empty callId")
            if waiting is None:
                add(
                    ViolationKind.NO_OPEN_STEP,
                    f"tool call {event.call_id!r} is outside an open step",
                )
            elif waiting[event.call_id]:
                add(
                    ViolationKind.DUPLICATE_CALL,
                    f"tool call id {event.call_id!r} is already waiting for a result",
                )
        elif kind is ToolResult and isinstance(event, ToolResult):
            call_id = _result_call_id(event)
            waiting = self._open_step(event.turn, event.step)
            not_started = (
                event.error is not msgspec.UNSET and event.error.code == "TOOL_NOT_STARTED"
            )
            if not call_id:
                add(ViolationKind.EMPTY_ID, "a tool/result answers an empty call id")
            elif waiting is None:
                add(
                    ViolationKind.NO_OPEN_STEP, f"the result of {call_id!r} is outside an open step"
                )
            elif not waiting[call_id] and not not_started:
                add(
                    ViolationKind.RESULT_WITHOUT_CALL,
                    f"tool/result for {call_id!r}, which no tool/call of step {event.step} "
                    "is waiting for",
                )
        elif (kind is CodeDispatchStart or kind is CodeDispatch) \
                and isinstance(event, (CodeDispatchStart, CodeDispatch)):
            found.extend(self._dispatch_violations(event))
        elif kind is CodeReplayed and isinstance(event, CodeReplayed):
            if not (event.sub_call_id and event.root_call_id and event.parent_call_id
                    and event.replayed_from):
                add(ViolationKind.EMPTY_ID, "a tool/code-replayed has an empty id")
            if self._turn is None:
                add(ViolationKind.DISPATCH_OUTSIDE_TURN,
                    f"the replay of sub-call {event.sub_call_id!r} is outside an open turn")
        elif kind is CodeLookup and isinstance(event, CodeLookup):
            if not (event.sub_call_id and event.root_call_id and event.parent_call_id):
                add(ViolationKind.EMPTY_ID, "a tool/code-lookup has an empty id")
            if self._turn is None:
                add(ViolationKind.DISPATCH_OUTSIDE_TURN,
                    f"the lookup {event.sub_call_id!r} is outside an open turn")
        elif kind is CodeResumed and isinstance(event, CodeResumed):
            if not (event.root_call_id and event.parent_call_id and event.run_id):
                add(ViolationKind.EMPTY_ID, "a tool/code-resumed has an empty id")
            if self._turn is None:
                add(ViolationKind.DISPATCH_OUTSIDE_TURN,
                    f"the resumption {event.parent_call_id!r} went live outside an open turn")
        elif kind is CodeApprovalUsed and isinstance(event, CodeApprovalUsed):
            if not (event.root_call_id and event.parent_call_id and event.approval_id):
                add(ViolationKind.EMPTY_ID, "a tool/code-approval-used has an empty id")
            if self._turn is None:
                add(ViolationKind.DISPATCH_OUTSIDE_TURN,
                    f"the run {event.parent_call_id!r} used a plan approval outside an open "
                    "turn")
        elif kind is ToolResumed and isinstance(event, ToolResumed) \
                and event.run_id not in self._suspended:
            add(ViolationKind.RESUME_WITHOUT_SUSPEND,
                f"run {event.run_id!r} is resumed but no suspension of it is waiting")
        return found

    def _dispatch_violations(self, event: CodeDispatchStart | CodeDispatch) -> list[Violation]:
        found: list[Violation] = []
        sub, root, parent = event.sub_call_id, event.root_call_id, event.parent_call_id
        known_root = self._roots.get(sub)
        cls = type(event)
        starting = cls is CodeDispatchStart or (
            cls is not CodeDispatch and _kind(event) is CodeDispatchStart)
        if starting:
            if self._turn is not None and known_root is None and sub and root and parent and (
                    parent == root or self._roots.get(parent) == root):
                return found                        # the usual start: nothing to report
        elif self._turn is not None and sub and root and parent and sub in self._running \
                and known_root == root:
            return found                            # the usual settle
        kind = "start" if starting else "settle"

        def add(what: ViolationKind, message: str) -> None:
            found.append(Violation(kind=what, seq=event.seq, message=message))

        if not sub or not root or not parent:   # an empty *name* is the program's, refused
            add(                                 # like a model's (INVALID_ARGS), and logged
                ViolationKind.EMPTY_ID,
                f"a dispatch {kind} has an empty subCallId, rootCallId or parentCallId",
            )
            return found
        if self._turn is None:
            add(
                ViolationKind.DISPATCH_OUTSIDE_TURN,
                f"the {kind} of sub-call {sub!r} is outside an open turn",
            )
        if starting:
            if known_root is not None:
                add(ViolationKind.DUPLICATE_SUB_CALL, f"sub-call {sub!r} starts a second time")
            if parent != root and self._roots.get(parent) != root:
                add(
                    ViolationKind.UNKNOWN_PARENT,
                    f"sub-call {sub!r} names parent {parent!r}, neither its root nor a sub-call "
                    f"under {root!r}",
                )
        else:
            if sub not in self._running:
                add(
                    ViolationKind.SETTLE_WITHOUT_START,
                    f"sub-call {sub!r} settles but is not running",
                )
            elif known_root != root:
                add(
                    ViolationKind.ROOT_CHANGED,
                    f"sub-call {sub!r} started under {known_root!r}, settles under {root!r}",
                )
        return found

    def _open_step(self, turn: int, step: int) -> Counter[str] | None:
        """The calls waiting in step ``step`` of turn ``turn``; ``None`` if it is not open."""
        if self._turn is None or self._turn.turn != turn:
            return None
        return self._steps.get(step)

    def _left_open(self, seq: int, how: str) -> list[Violation]:
        found: list[Violation] = []
        if self._turn is None:
            return found
        turn = self._turn.turn
        for step in self._steps:
            found.append(
                Violation(
                    kind=ViolationKind.UNCLOSED_STEP,
                    seq=seq,
                    message=f"turn {turn} {how} before step {step} ended",
                )
            )
        for call_id in (c for waiting in self._steps.values() for c in waiting):
            found.append(
                Violation(
                    kind=ViolationKind.UNANSWERED_CALL,
                    seq=seq,
                    message=f"turn {turn} {how} before tool call {call_id!r} has a result",
                )
            )
        for sub in self._turn_starts:
            if sub in self._running:
                found.append(
                    Violation(
                        kind=ViolationKind.UNSETTLED_SUB_CALL,
                        seq=seq,
                        message=f"turn {turn} {how} before sub-call {sub!r} settled",
                    )
                )
        return found

    def _start(self, event: CodeDispatchStart) -> None:
        sub = event.sub_call_id
        if not sub:
            return
        if sub not in self._roots:
            self._roots[sub] = event.root_call_id
        self._running[sub] = event
        if self._turn is not None:
            self._turn_starts.append(sub)

    def apply(self, event: Event) -> None:
        self._seq = event.seq
        cls = type(event)      # a long run's many dispatch events first, without the chain
        if cls is CodeDispatch:
            self._running.pop(event.sub_call_id, None)  # type: ignore[attr-defined]
            return
        if cls is CodeDispatchStart:
            self._start(event)  # type: ignore[arg-type]
            return
        kind = _kind(event)
        if kind is TurnStart and isinstance(event, TurnStart):
            self._turn = event
            self._steps = {}
            self._turn_starts = []
        elif kind is TurnEnd and isinstance(event, TurnEnd):
            self._turn = None
            self._steps = {}
            for sub in self._turn_starts:  # orphans of a closed turn: reported once
                self._running.pop(sub, None)
            self._turn_starts = []
        elif kind is StepStart and isinstance(event, StepStart):
            if self._turn is not None and event.turn == self._turn.turn:
                self._steps[event.step] = Counter()
        elif kind is StepEnd and isinstance(event, StepEnd):
            if self._open_step(event.turn, event.step) is not None:
                del self._steps[event.step]
        elif kind is ToolCall and isinstance(event, ToolCall):
            waiting = self._open_step(event.turn, event.step)
            if waiting is not None:
                waiting[event.call_id] += 1
        elif kind is ToolResult and isinstance(event, ToolResult):
            waiting = self._open_step(event.turn, event.step)
            call_id = _result_call_id(event)
            run_id = self._resuming.pop(call_id, None)
            if run_id is not None and event.error is not msgspec.UNSET \
                    and event.error.code == "TOOL_OUTCOME_UNKNOWN":
                self._suspended.add(run_id)     # a crashed resumption gives it back
            if waiting is not None:
                if waiting[call_id] > 1:
                    waiting[call_id] -= 1
                else:
                    waiting.pop(call_id, None)
        elif kind is CodeDispatchStart and isinstance(event, CodeDispatchStart):
            self._start(event)
        elif kind is CodeDispatch and isinstance(event, CodeDispatch):
            self._running.pop(event.sub_call_id, None)
        elif kind is ToolSuspended and isinstance(event, ToolSuspended):
            self._suspended.add(event.run_id)
        elif kind is ToolResumed and isinstance(event, ToolResumed):
            self._suspended.discard(event.run_id)
            self._resuming[event.call_id] = event.run_id

    def finish(self) -> list[Violation]:
        """What a complete log must not leave open: the open turn (``UNCLOSED_TURN``, at its
        ``turn/start``), calls waiting for a result, sub-calls not settled."""
        found: list[Violation] = []
        if self._turn is not None:
            found.append(
                Violation(
                    kind=ViolationKind.UNCLOSED_TURN,
                    seq=self._turn.seq,
                    message=f"the log ends with turn {self._turn.turn} open",
                )
            )
            found.extend(self._left_open(self._seq, "is still open"))
        for sub, start in self._running.items():
            if sub not in self._turn_starts:
                found.append(
                    Violation(
                        kind=ViolationKind.UNSETTLED_SUB_CALL,
                        seq=start.seq,
                        message=f"sub-call {sub!r} never settled",
                    )
                )
        return found


_KINDS: tuple[type[Event], ...] = (TurnStart, TurnEnd, StepStart, StepEnd, ToolCall, ToolResult,
                                   CodeDispatchStart, CodeDispatch, CodeReplayed, CodeLookup,
                                   CodeResumed, CodeApprovalUsed, ToolSuspended,
                                   ToolResumed)
_kind_of: dict[type, type[Event] | None] = {kind: kind for kind in _KINDS}


def _kind(event: Event) -> type[Event] | None:
    """Which of the events the checks tell apart `event` is (None: another one). The checks
    branch on it before `isinstance`, which is slow for a msgspec Struct class the event is
    not an instance of (its metaclass's instance check), and fast for its own."""
    kind = type(event)
    try:
        return _kind_of[kind]
    except KeyError:
        found = next((k for k in _KINDS if issubclass(kind, k)), None)
        _kind_of[kind] = found
        return found


def _result_call_id(event: ToolResult) -> str:
    try:
        return event.call_id
    except (IndexError, AttributeError):
        return ""


def check(events: Iterable[Event], *, complete: bool = True) -> list[Violation]:
    """Every violation of the log invariants in ``events`` (a whole log, in order), in log
    order; ``[]`` for a sound log. ``complete=False`` for a log that may still be written
    (or crashed and was not reopened): what is still open at its end is then no violation.
    """
    checker = LogChecker()
    found: list[Violation] = []
    for event in events:
        found.extend(checker.feed(event))
    if complete:
        found.extend(checker.finish())
    return found
