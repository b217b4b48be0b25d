"""`python -m benchmarks.approvals`: what following a plan approval costs a run."""

import re

import pytest

from benchmarks import approvals


@pytest.mark.slow
def test_the_command_prints_a_row_per_backend_and_log_size(capsys):
    approvals.main(["--earlier", "10", "60", "--rounds", "1"])
    rows = capsys.readouterr().out.splitlines()
    found = [re.fullmatch(r"(\w+) +(\d+) earlier events: +([\d.]+) ms with an approval, +"
                          r"([\d.]+) ms allowed without one \(([\d.]+)x\)", row) for row in rows]
    assert [(m[1], m[2]) for m in found if m] == [("jsonl", "10"), ("jsonl", "60"),
                                                  ("db", "10"), ("db", "60")], rows
    assert all(float(m[3]) > 0 and float(m[4]) > 0 for m in found if m)


async def test_each_approved_round_sends_through_its_own_approval(tmp_path):
    approved, plain = await approvals.best_times(tmp_path / "s.jsonl", 0, 2)
    assert approved > 0 and plain > 0
    from codemode.pipeline import events
    from codemode.pipeline.log import load
    logged = load(tmp_path / "s.jsonl")
    assert len([e for e in logged if isinstance(e, events.CodeApprovalUsed)]) == 2
    assert len([e for e in logged if isinstance(e, events.ApprovalDecided)]) == 10
