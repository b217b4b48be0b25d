"""A plan approval is used by one run per log (docs/codemode.md "Plan before the run"), on
both log backends: `codemode run --approval FILE` a second time with the same log is
refused before anything runs, also after a run that failed or was killed (kill -9 right
after the run's marker, or after its first send), through another path to the log file,
and after someone edited the log to remove or change the run's marker (which `codemode log
check` reports); `--approval` needs `--log`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from codemode.pipeline import Session
from codemode.pipeline.log import check, load
from tests.codemode.cli.test_cli_plan import POLICY, PROGRAM, TOOLS, codemode
from tests.codemode.run.test_seal_forgeries import _events, _rewrite

pytestmark = pytest.mark.slow

SUFFIXES = [".db", ".jsonl"]
COMMON = ["--tools", "mytools:TOOLS", "--policy", "policy.toml"]


@pytest.fixture
def approved(tmp_path: Path) -> Path:
    """A project with a sealed approval of `prog.py`'s two sends, `ok.json`."""
    (tmp_path / "mytools.py").write_text(TOOLS)
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "policy.toml").write_text(POLICY)
    made = codemode("plan", "prog.py", *COMMON, "--approve", "--out", "ok.json", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    return tmp_path


def _sent(project: Path) -> list[str]:
    sent = project / "sent.txt"
    return sent.read_text().splitlines() if sent.exists() else []


def _run_approved(project: Path, log: str, *more: str) -> subprocess.CompletedProcess[str]:
    """`codemode run prog.py` following the approval in ok.json, with the log `log`."""
    return codemode("run", "prog.py", *COMMON, *more, "--log", log, "--approval", "ok.json",
                    cwd=project)


def _approval_lines(project: Path, log: str) -> tuple[int, list[str]]:
    checked = codemode("log", "check", log, cwd=project)
    return checked.returncode, [line for line in checked.stdout.splitlines()
                                if ": APPROVAL: " in line or ": SEAL: " in line]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_the_second_run_of_an_approval_with_the_same_log_is_refused(approved: Path,
                                                                  suffix: str) -> None:
    log = f"s{suffix}"
    first = _run_approved(approved, log)
    assert first.returncode == 0, first.stderr
    assert _sent(approved) == ["hello@example.com", "numbers@example.com"]
    events = len(_events(approved / log))

    again = _run_approved(approved, log)
    assert again.returncode == 2, again.stderr
    approval_id = json.loads((approved / "ok.json").read_text())["id"]
    assert again.stderr.startswith(f"error: ApprovalUsed: the plan approval {approval_id!r} "
                                   "was already used by the run ")
    assert "an approval is used once per log" in again.stderr and again.stdout == ""
    assert _sent(approved) == ["hello@example.com", "numbers@example.com"]    # once each
    assert len(_events(approved / log)) == events                  # nothing logged either
    assert _approval_lines(approved, log) == (0, [])


def test_an_approval_needs_a_log_that_records_its_use(approved: Path) -> None:
    done = codemode("run", "prog.py", *COMMON, "--approval", "ok.json", cwd=approved)
    assert done.returncode == 2, done.stderr
    assert "--approval needs --log FILE" in done.stderr
    assert _sent(approved) == []


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_run_that_failed_used_its_approval(approved: Path, suffix: str) -> None:
    log = f"s{suffix}"
    failed = _run_approved(approved, log, "--fuel", "1")
    assert failed.returncode == 1, failed.stderr
    assert _sent(approved) == []
    again = _run_approved(approved, log)
    assert again.returncode == 2 and "already used" in again.stderr, again.stderr
    assert _sent(approved) == []


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("forgery", ["marker removed", "marker's seal changed"])
def test_an_edited_marker_does_not_free_the_approval_and_is_reported(
        approved: Path, suffix: str, forgery: str) -> None:
    log = f"s{suffix}"
    run = ["run", "prog.py", *COMMON, "--log", log, "--approval", "ok.json"]
    assert codemode(*run, cwd=approved).returncode == 0
    assert _approval_lines(approved, log) == (0, [])

    def edit(event: dict[str, Any]) -> dict[str, Any] | None:
        if event["type"] != "tool/code-approval-used":
            return event
        return None if forgery == "marker removed" else {**event, "seal": "0" * 64}

    _rewrite(approved / log, edit)          # someone who can write the log, not the key
    code, lines = _approval_lines(approved, log)
    assert code == 1 and len(lines) == (1 if forgery == "marker removed" else 2), lines
    if forgery != "marker removed":
        assert "does not match its seal" in lines[0]
    assert "had calls decided by plan approval" in lines[-1]     # its marker does not count
    assert "without a sealed record of its use" in lines[-1]

    # fails closed: a changed marker still counts, a removed one leaves the decisions
    again = codemode(*run, cwd=approved)
    assert again.returncode == 2 and "was already used" in again.stderr, again.stderr
    assert _sent(approved) == ["hello@example.com", "numbers@example.com"]
    assert _approval_lines(approved, log) == (code, lines)


ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("kill_after, sent", [
    (("tool/code-approval-used", 1), []),
    (("tool/code-dispatch", 2), ["hello@example.com"]),      # after inbox(), the first send
])
def test_a_run_killed_mid_way_used_its_approval(approved: Path, suffix: str,
                                                kill_after: tuple[str, int],
                                                sent: list[str]) -> None:
    log = f"s{suffix}"
    run = ["-m", "codemode", "run", "prog.py", *COMMON, "--log", log, "--approval", "ok.json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    killed = subprocess.run([sys.executable, "-m", "tests.kill_after", kill_after[0],
                             str(kill_after[1]), *run], capture_output=True, text=True,
                            cwd=approved, env=env, timeout=300, check=False)
    assert killed.returncode == -9, killed.stderr
    assert _sent(approved) == sent
    Session(log=approved / log).close()                  # crash repair, as the next open does
    assert check(load(approved / log)) == []
    again = _run_approved(approved, log)
    assert again.returncode == 2 and "already used by the run" in again.stderr, again.stderr
    assert _sent(approved) == sent                     # nothing sent again
    assert _approval_lines(approved, log) == (0, [])


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_refused_approval_leaves_no_new_log_behind(approved: Path, suffix: str) -> None:
    approval = json.loads((approved / "ok.json").read_text())
    forged = {**approval, "entries": [{**e, "arguments": {**e["arguments"], "to": "x@y.z"}}
                                      for e in approval["entries"]]}
    (approved / "forged.json").write_text(json.dumps(forged))
    before = sorted(p.name for p in approved.iterdir())
    refused = codemode("run", "prog.py", *COMMON, "--log", f"new{suffix}", "--approval",
                       "forged.json", cwd=approved)
    assert refused.returncode == 2 and "was changed after it was given" in refused.stderr
    assert sorted(p.name for p in approved.iterdir() if p.name != "__pycache__") == \
        [n for n in before if n != "__pycache__"]
    assert _sent(approved) == []


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_second_run_through_a_link_to_the_log_is_refused(approved: Path,
                                                           suffix: str) -> None:
    log = f"s{suffix}"
    first = _run_approved(approved, log)
    assert first.returncode == 0, first.stderr
    (approved / f"symbolic{suffix}").symlink_to(approved / log)
    os.link(approved / log, approved / f"hard{suffix}")
    for other in (f"symbolic{suffix}", f"hard{suffix}", str(approved / "." / log)):
        again = _run_approved(approved, other)
        assert again.returncode == 2 and "already used by the run" in again.stderr, other
    assert _sent(approved) == ["hello@example.com", "numbers@example.com"]


SLOW = """\
import time
send_email(to="a@example.com", body="1")
time.sleep(6)
send_email(to="b@example.com", body="2")
"""


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_run_through_a_link_while_the_approved_run_writes_the_log_is_refused(
        approved: Path, suffix: str) -> None:
    (approved / "slow.py").write_text(SLOW)
    made = codemode("plan", "slow.py", *COMMON, "--timeout", "60", "--approve", "--out",
                    "slow.json", cwd=approved)
    assert made.returncode == 0, made.stderr
    log = approved / f"s{suffix}"
    first = subprocess.Popen(
        [sys.executable, "-m", "codemode", "run", "slow.py", *COMMON, "--timeout", "60",
         "--log", log.name, "--approval", "slow.json"],
        cwd=approved, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while _sent(approved) == []:                     # the first send is done: mid-run
            assert first.poll() is None, first.communicate()
            time.sleep(0.05)
        (approved / f"symbolic{suffix}").symlink_to(log)
        os.link(log, approved / f"hard{suffix}")
        for other in (f"symbolic{suffix}", f"hard{suffix}"):
            second = codemode("run", "slow.py", *COMMON, "--log", other, "--approval",
                              "slow.json", cwd=approved)
            assert second.returncode == 2, second.stderr
            assert "is in use by another session or process" in second.stderr
    finally:
        _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert _sent(approved) == ["a@example.com", "b@example.com"]
    assert _approval_lines(approved, log.name) == (0, [])
