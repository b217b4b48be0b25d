"""Which resumptions used a paused run's record, from sealed data only (docs/codemode.md
"Who can change a paused run").

A paused run's record (its `tool/suspended` event, sealed: `seal`) may be used by one
resumption. When a resumption goes live (the calls a person decided on start), `run_code`
logs `tool/code-resumed`: the run, the resuming call, the record's seal and the decisions it
applies, sealed together with the same key. From those markers alone:

- a record that a live resumption already used is refused, whatever copy of it is appended
  to the log later, unless that resumption's call crashed (the first result of its call is
  crash repair's `TOOL_OUTCOME_UNKNOWN`): then the run may be resumed again;
- the answers a crashed resumption settled are taken only from resumptions whose marker
  names the same record (`replay.earlier_answers`), never from unsealed events;
- `seal_problems` lists, for `codemode log check`, each record, marker or answer whose seal
  does not match, decisions changed after they were applied, and a record used twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from codemode.pipeline import ApprovalDecision, events

from .seal import SEAL_FIELD, ResumeTampered, SealKey

__all__ = ["Uses", "record_seal", "seal_problems", "uses_of", "went_live"]

CRASHED = "TOOL_OUTCOME_UNKNOWN"
"""The code crash repair gives a call whose process died (pipeline's log recovery)."""


def record_seal(state: Any) -> str:
    """The seal a paused run's record carries (`state["seal"]`), or "" when it has none."""
    seal = state.get(SEAL_FIELD) if isinstance(state, dict) else None
    return seal if isinstance(seal, str) else ""


def _sign(key: SealKey, *, run_id: str, call_id: str, record: str,
          decisions: Sequence[ApprovalDecision]) -> str:
    # the resuming call is part of the name: a marker cannot be moved to another resumption
    return key.sign(run_id=run_id, name=f"resumption {call_id}",
                    arguments={"record_seal": record}, requests=tuple(decisions), state={},
                    agent=None)


def went_live(key: SealKey, *, root_call_id: str, call_id: str, run_id: str, record: str,
              decisions: Sequence[ApprovalDecision]) -> events.CodeResumed:
    """The `tool/code-resumed` marker of the resumption `call_id` of `run_id`, which uses
    the record sealed `record` with `decisions`, sealed with `key`.

    Raises:
        SealKeyError: the key cannot be used."""
    return events.CodeResumed(
        root_call_id=root_call_id, parent_call_id=call_id, run_id=run_id, record_seal=record,
        decisions=tuple(decisions),
        seal=_sign(key, run_id=run_id, call_id=call_id, record=record, decisions=decisions))


def _holds(key: SealKey, marker: events.CodeResumed) -> bool:
    import hmac  # here, not at the top: it loads OpenSSL, which only resumptions need

    want = _sign(key, run_id=marker.run_id, call_id=marker.parent_call_id,
                 record=marker.record_seal, decisions=marker.decisions)
    return hmac.compare_digest(marker.seal, want)


class Uses(msgspec.Struct, frozen=True, kw_only=True):
    """The live resumptions of one record, from its sealed markers, in log order.

    Attributes:
        attempts: the resuming calls' ids.
        finished: those whose call did not crash (no result yet counts as not crashed: the
            resumption may still be running in another process).
    """

    attempts: tuple[str, ...]
    finished: tuple[str, ...]

    def refuse_if_used(self, run_id: str) -> None:
        """Before a resumption goes live (it has no marker yet, so every marker is another
        resumption's, even one a log writer gave the same call id).

        Raises:
            ResumeTampered: another resumption already used this record (a copy of it was
                appended to the log after that resumption)."""
        used = next(iter(self.finished), None)
        if used is not None:
            raise ResumeTampered(
                f"the paused run {run_id!r} was already resumed from this record (by call "
                f"{used!r}); a record is used once per log, and a copy appended later is "
                "refused; nothing ran")


def _first_results(log: Iterable[events.Event]) -> dict[str, bool]:
    """By call id, whether its first `tool/result` is crash repair's."""
    crashed: dict[str, bool] = {}
    for event in log:
        if isinstance(event, events.ToolResult) and event.call_id not in crashed:
            crashed[event.call_id] = (event.error is not msgspec.UNSET
                                      and event.error.code == CRASHED)
    return crashed


def uses_of(log: Sequence[events.Event], run_id: str, record: str, key: SealKey) -> Uses:
    """The live resumptions of `run_id` from the record sealed `record`, read from the
    markers in `log` whose seal holds under `key` (a forged marker is ignored).

    Raises:
        SealKeyError: the key cannot be used."""
    attempts = [e.parent_call_id for e in log
                if isinstance(e, events.CodeResumed) and e.run_id == run_id
                and e.record_seal == record and _holds(key, e)]
    if not attempts:
        return Uses(attempts=(), finished=())
    crashed = _first_results(log)
    return Uses(attempts=tuple(attempts),
                finished=tuple(a for a in attempts if not crashed.get(a, False)))


def seal_problems(log: Sequence[events.Event], key: SealKey) -> list[tuple[int, str]]:
    """What `codemode log check` reports of the seals in `log`, as (seq, message), in log
    order: a paused run's record whose seal does not match (or that lost it); a
    `tool/code-resumed` marker whose seal does not match; a resumption whose decisions in
    `tool/resumed` differ from the sealed ones it applied, or that names another record
    than its run's latest; a record used by a second resumption after one that did not
    crash, or a copy of it logged again after; a resumption that ran calls without a
    marker; an answer a resumption left whose
    seal does not match its run, call, tool and arguments.

    Raises:
        SealKeyError: the key cannot be used."""
    from .replay import answer_holds

    problems: list[tuple[int, str]] = []
    latest: dict[str, str] = {}              # run id -> its latest record's seal
    resumed: dict[str, events.ToolResumed] = {}  # resuming call id -> its event
    marked: set[str] = set()
    used: dict[str, str] = {}                # record seal -> the resumption that used it
    crashed = _first_results(log)
    for event in log:
        if isinstance(event, events.ToolSuspended) and _is_record(event.state):
            latest[event.run_id] = record_seal(event.state)
            if latest[event.run_id] in used:
                problems.append((event.seq, f"the record of paused run {event.run_id!r} "
                                            "appears again after resumption "
                                            f"{used[latest[event.run_id]]!r} used it (a copy "
                                            "appended to the log)"))
            try:
                key.check(run_id=event.run_id, name=event.name, arguments=event.arguments,
                          requests=event.requests, state=event.state,
                          agent=event.agent if isinstance(event.agent, str) else None)
            except ResumeTampered:
                problems.append((event.seq, f"the record of paused run {event.run_id!r} does "
                                            "not match its seal (changed, or sealed with "
                                            "another key)"))
        elif isinstance(event, events.ToolResumed):
            resumed[event.call_id] = event
        elif isinstance(event, events.CodeResumed):
            problems.extend((event.seq, m) for m in _marker_problems(
                event, key, resumed.get(event.parent_call_id), latest.get(event.run_id),
                used, crashed))
            marked.add(event.parent_call_id)
        elif isinstance(event, events.CodeDispatch) and isinstance(event.answer, dict) \
                and event.parent_call_id in resumed:
            if event.parent_call_id not in marked:
                problems.append((event.seq, f"resumption {event.parent_call_id!r} ran "
                                            f"{event.sub_call_id!r} without a sealed record "
                                            "of its decisions (tool/code-resumed)"))
                marked.add(event.parent_call_id)          # once per resumption
            if not answer_holds(key, resumed[event.parent_call_id].run_id, event):
                problems.append((event.seq, f"the answer of sub-call {event.sub_call_id!r} "
                                            "does not match its seal (changed, or moved from "
                                            "another call or tool)"))
    return problems


def _is_record(state: Any) -> bool:
    """Whether a suspension's state is a Code-Mode run's record (sealed, or was)."""
    return isinstance(state, dict) and (SEAL_FIELD in state or "exchanges" in state)


def _marker_problems(marker: events.CodeResumed, key: SealKey,
                     logged: events.ToolResumed | None, latest: str | None,
                     used: dict[str, str], crashed: dict[str, bool]) -> list[str]:
    call = marker.parent_call_id
    if not _holds(key, marker):
        return [f"the record of resumption {call!r} (tool/code-resumed) does not match its "
                "seal"]
    found = []
    if logged is None or msgspec.to_builtins(logged.decisions) \
            != msgspec.to_builtins(marker.decisions):
        found.append(f"the decisions of resumption {call!r} in tool/resumed differ from the "
                     "sealed ones it applied")
    if latest != marker.record_seal:
        found.append(f"resumption {call!r} used a record that is not the latest of run "
                     f"{marker.run_id!r}")
    earlier = used.get(marker.record_seal)
    if earlier is not None:
        found.append(f"resumption {call!r} used the record of run {marker.run_id!r} again, "
                     f"after resumption {earlier!r} used it")
    if not crashed.get(call, False):
        used[marker.record_seal] = call
    return found
