"""A quota still holds after a crash (kill -9 right after a chosen log event, `tests.kill_after`)
and the log's crash repair, on both log backends: the calls counted come from what the log
says ran, and a call crash repair settled TOOL_OUTCOME_UNKNOWN counts as used (once, also
when a later resumption makes it again with the same idempotency key)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codemode._policy.quotas import UsageCounter, usage_from_log
from codemode.pipeline import events
from codemode.pipeline.log import check, load
from tests.codemode.policy.test_quotas import PROGRAM, QUOTA_POLICY

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]

#: runs a program (or resumes run1, approving its pause) in a session whose policy is argv[3]
SCRIPT = '''\
import asyncio, json, sys
from codemode import Policy, Session
from codemode.pipeline import ApprovalDecision, events
from tests.codemode.policy.test_quotas import quota_tools

async def main(log: str, what: str, policy: str, code: str) -> None:
    session = Session(tools=quota_tools({}), log=log)
    Policy.from_data(json.loads(policy)).apply(session)
    if what == "resume":
        paused = [e for e in session.log.read() if isinstance(e, events.ToolSuspended)][-1]
        result = await session.resume("run1", [ApprovalDecision(id=paused.requests[0].id,
                                                                approved=True)])
    else:
        result = await session.call("run_code", {"code": code}, call_id=what)
    print(json.dumps(result.value if not result.is_error else result.text))
    await session.aclose()

asyncio.run(main(*sys.argv[1:5]))
'''


def run(script: Path, log: Path, what: str, policy: dict, code: str = "",
        kill_after: tuple[str, int] | None = None) -> subprocess.CompletedProcess[str]:
    killer = [] if kill_after is None else ["-m", "tests.kill_after", kill_after[0],
                                            str(kill_after[1])]
    return subprocess.run([sys.executable, *killer, str(script), str(log), what,
                           json.dumps(policy), code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def settled(log: Path) -> list[tuple[str, str | None]]:
    """Each settled sub-call of a send_* tool: (sub-call id, code or None for a success)."""
    return [(e.sub_call_id, e.code if isinstance(e.code, str) else None) for e in load(log)
            if isinstance(e, events.CodeDispatch) and e.name.startswith("send_")]


@pytest.fixture(params=["jsonl", "db"])
def log_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    (tmp_path / "quota_run.py").write_text(SCRIPT)
    return tmp_path / f"session.{request.param}"


def test_a_fourth_call_is_refused_after_a_resumption_crashed_and_was_repaired(
        log_path: Path) -> None:
    script = log_path.with_name("quota_run.py")
    paused = run(script, log_path, "run1", QUOTA_POLICY, PROGRAM)
    assert '"pending"' in paused.stdout, paused.stderr
    # the resumption dies right after send_mail(to="c") starts (its 2nd dispatch start,
    # after approve_me's): the mail may or may not have gone
    killed = run(script, log_path, "resume", QUOTA_POLICY,
                 kill_after=("tool/code-dispatch-start", 2))
    assert killed.returncode == -9, killed.stderr
    done = run(script, log_path, "resume", QUOTA_POLICY)     # opening the log repairs it
    assert done.returncode == 0, done.stderr
    assert check(load(log_path)) == []
    assert "".join(json.loads(done.stdout)["logs"]) == (
        "ToolCallError QUOTA_EXCEEDED\nToolCallError QUOTA_EXCEEDED\n")
    assert settled(log_path) == [
        ("run1:code:1", None), ("run1:code:2", None),
        ("run1:resume:1:code:4", "TOOL_OUTCOME_UNKNOWN"),
        # the retry of that same call (key run1:4) counts once with it: the third call
        ("run1:resume:2:code:4", None),
        ("run1:resume:2:code:5", "QUOTA_EXCEEDED"), ("run1:resume:2:code:6", "QUOTA_EXCEEDED")]
    same_counts_as_a_whole_read(log_path)


def same_counts_as_a_whole_read(log: Path) -> None:
    """The running count (what enforcement uses) says what reading the whole log says, for
    every run and every call left out, after every event."""
    logged = load(log)
    counter = UsageCounter()
    ids = {getattr(e, "sub_call_id", None) or getattr(e, "call_id", None) for e in logged}
    for n, event in enumerate(logged, start=1):
        counter.see(event)
        for run_id in ("run1", "first", "second", None):
            for exclude in (*sorted(i for i in ids if i), None):
                assert counter.usage(run_id, exclude) == usage_from_log(
                    logged[:n], run_id, exclude), (n, run_id, exclude)


def test_a_call_whose_outcome_a_crash_left_unknown_counts_against_the_session(
        log_path: Path) -> None:
    script = log_path.with_name("quota_run.py")
    policy = {"tier": "restricted-in-process", "quotas": [{"tool": "send_*", "per_session": 3}]}
    three = 'send_mail(to="a")\nsend_sms(to="b")\nsend_mail(to="c")\n'
    killed = run(script, log_path, "first", policy, three,
                 kill_after=("tool/code-dispatch-start", 3))
    assert killed.returncode == -9, killed.stderr
    fourth = ('try:\n    send_sms(to="d")\nexcept ToolCallError as e:\n    print(e.code)\n')
    done = run(script, log_path, "second", policy, fourth)
    assert done.returncode == 0, done.stderr
    assert check(load(log_path)) == []
    assert "".join(json.loads(done.stdout)["logs"]) == "QUOTA_EXCEEDED\n"
    assert settled(log_path) == [
        ("first:code:1", None), ("first:code:2", None),
        ("first:code:3", "TOOL_OUTCOME_UNKNOWN"), ("second:code:1", "QUOTA_EXCEEDED")]
    same_counts_as_a_whole_read(log_path)
