"""`codemode._run.approval_uses`: what `codemode log check` reports of plan approvals, from
the markers runs log and the `by` of the decisions approvals gave (docs/codemode.md "The
log: `codemode log check`")."""

from __future__ import annotations

import msgspec

from codemode._run.approval_uses import approval_problems, marker
from codemode._run.plan_approval import PlanApproval
from codemode._run.seal import SealKey
from codemode.pipeline import events

KEY = SealKey(key=bytes(range(32)))
APPROVAL = PlanApproval(id="ab12", code="send()", entries=(), seal="f" * 64)


def _decided(run: str, n: int, approval: str = "ab12") -> list[events.Event]:
    sub = f"{run}:code:{n}"
    return [events.CodeDispatchStart(root_call_id=run, parent_call_id=run, sub_call_id=sub,
                                     name="send", arguments={}),
            events.ApprovalAsked(id=f"{sub}:approval", tool_name="send", call_id=sub),
            events.ApprovalDecided(id=f"{sub}:approval", outcome="allowed-once",
                                   by=f"plan approval {approval}, entry {n}")]


def _numbered(found: list[events.Event]) -> list[events.Event]:
    return [msgspec.structs.replace(e, seq=i) for i, e in enumerate(found, start=1)]


def _marker(run: str) -> events.Event:
    return marker(KEY, APPROVAL, root_call_id=run, call_id=run)


def test_a_run_with_its_marker_is_sound() -> None:
    found = _numbered([_marker("r1"), *_decided("r1", 1), *_decided("r1", 2)])
    assert approval_problems(found, KEY) == []


def test_an_approval_that_decided_calls_in_two_runs_without_markers_is_reported_once_each(
        ) -> None:
    found = _numbered([*_decided("r1", 1), *_decided("r1", 2), *_decided("r2", 1)])
    messages = [m for _, m in approval_problems(found, None)]
    assert messages == [
        "run 'r1' had calls decided by plan approval 'ab12' without a sealed record of its "
        "use (tool/code-approval-used)",
        "run 'r2' had calls decided by plan approval 'ab12' without a sealed record of its "
        "use (tool/code-approval-used)",
        "plan approval 'ab12' decided calls of run 'r2' too, after run 'r1' used it"]


def test_a_marker_sealed_with_another_key_does_not_count() -> None:
    found = _numbered([_marker("r1"), *_decided("r1", 1)])
    other = SealKey(key=bytes(range(65, 97)))
    messages = [m for _, m in approval_problems(found, other)]
    assert len(messages) == 2 and "does not match its seal" in messages[0]
    assert approval_problems(found, None) == []        # without a key: seals not checked


def test_a_second_marker_of_one_approval_is_reported() -> None:
    found = _numbered([_marker("r1"), *_decided("r1", 1), _marker("r2"), *_decided("r2", 1)])
    assert [m for _, m in approval_problems(found, KEY)] == [
        "plan approval 'ab12' was used again by run 'r2', after run 'r1' used it"]
