"""Forgeries by someone who can write the session log but not read the seal key, on both
log backends: a copy of a used record appended again, a forged crash of a resumption that
finished, decisions rewritten after they were applied, a resumption's marker removed, an
answer moved to another call and tool. `codemode resume` refuses what would run something
(no tool runs), and `codemode log check` reports each one with the key."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codemode.pipeline import Session
from tests.codemode.cli.test_cli import codemode, report
from tests.codemode.cli.test_cli_resume import ASK_POLICY, counter, counts_of
from tests.codemode.run.test_kill_points import cli
from tests.codemode.run.test_resume import PROGRAM

pytestmark = [pytest.mark.mcp, pytest.mark.slow,
              pytest.mark.log_unchecked("the tests forge session logs")]

SUFFIXES = [".db", ".jsonl"]


def _events(log: Path) -> list[dict[str, Any]]:
    if log.suffix == ".jsonl":
        return [json.loads(line) for line in log.read_text().splitlines()]
    with sqlite3.connect(log) as db:
        return [json.loads(body) for (body,) in db.execute("SELECT body FROM events ORDER BY seq")]


def _append(log: Path, event: dict[str, Any]) -> None:
    """Append `event` as the log's next one, as a writer of the file would."""
    event = {**event, "seq": _events(log)[-1]["seq"] + 1}
    if log.suffix == ".jsonl":
        with log.open("a") as out:
            out.write(json.dumps(event, separators=(",", ":")) + "\n")
        return
    with sqlite3.connect(log) as db:
        db.execute("INSERT INTO events (seq, type, time, body) VALUES (?, ?, ?, ?)",
                   (event["seq"], event["type"], event["time"], json.dumps(event)))


def _rewrite(log: Path, edit: Callable[[dict[str, Any]], dict[str, Any] | None]) -> None:
    """Replace every event by `edit(event)` (None drops it) and number them again, as a
    writer of the file who wants the log to still open would."""
    kept = [e for e in map(edit, _events(log)) if e is not None]
    for seq, event in enumerate(kept, start=1):
        event["seq"] = seq
    if log.suffix == ".jsonl":
        log.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in kept))
        return
    with sqlite3.connect(log) as db:
        db.execute("DELETE FROM events")
        db.executemany("INSERT INTO events (seq, type, time, body) VALUES (?, ?, ?, ?)",
                       [(e["seq"], e["type"], e["time"], json.dumps(e)) for e in kept])


def _paused(tmp_path: Path, suffix: str) -> tuple[Path, list[str], str]:
    (tmp_path / "prog.py").write_text(PROGRAM, encoding="utf-8")
    (tmp_path / "ask.toml").write_text(ASK_POLICY, encoding="utf-8")
    tools = ["--mcp", counter(tmp_path / "counts.json"), "--policy", str(tmp_path / "ask.toml")]
    log = tmp_path / f"s{suffix}"
    paused = codemode("run", str(tmp_path / "prog.py"), *tools, "--log", str(log), "--json")
    assert paused.returncode == 3, paused.stderr.decode()
    return log, tools, report(paused)["run_id"]


def _seal_lines(log: Path) -> tuple[int, list[str]]:
    checked = codemode("log", "check", str(log))
    return checked.returncode, [line for line in checked.stdout.decode().splitlines()
                                if ": SEAL: " in line]


def _resumed_ok(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stderr.decode()


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_used_record_appended_again_is_refused_and_reported(tmp_path: Path,
                                                             suffix: str) -> None:
    log, tools, run_id = _paused(tmp_path, suffix)
    _resumed_ok(codemode("resume", str(log), run_id, *tools, "--approve-all", "--json"))
    counts = counts_of(tmp_path / "counts.json")
    assert (counts["step_b"], counts["step_c"]) == (1, 1)
    assert _seal_lines(log) == (0, [])

    # the finished resumption's tool/resumed taken out: the next one would get its call id
    edited = tmp_path / f"edited{suffix}"
    edited.write_bytes(log.read_bytes())
    _rewrite(edited, lambda e: None if e["type"] == "tool/resumed" else e)
    same_id = codemode("resume", str(edited), run_id, *tools, "--approve-all", "--json")
    assert report(same_id)["kind"] == "resume_tampered", same_id.stderr.decode()
    assert counts_of(tmp_path / "counts.json") == counts

    events = _events(log)
    record = [e for e in events if e["type"] == "tool/suspended"][-1]
    resuming = [e for e in events if e["type"] == "tool/resumed"][-1]["callId"]
    _append(log, record)
    # and a crash of the finished resumption, forged: its first result still says it ended
    crash = next(e for e in events if e["type"] == "tool/result"
                 and e["message"]["source"].get("callId") == resuming)
    _append(log, {**crash, "error": {"name": "ToolOutcomeUnknown",
                                     "code": "TOOL_OUTCOME_UNKNOWN"}})
    again = codemode("resume", str(log), run_id, *tools, "--approve-all", "--json")
    final = report(again)
    assert (again.returncode, final["kind"]) == (1, "resume_tampered"), again.stderr.decode()
    assert "a record is used once per log" in final["error"]["message"]
    assert counts_of(tmp_path / "counts.json") == counts          # the approved calls: once
    code, lines = _seal_lines(log)
    assert code == 1 and len(lines) == 1 and "appears again after resumption" in lines[0]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_decisions_rewritten_after_a_resumption_are_reported(tmp_path: Path,
                                                             suffix: str) -> None:
    log, tools, run_id = _paused(tmp_path, suffix)
    _resumed_ok(codemode("resume", str(log), run_id, *tools, "--approve", f"{run_id}:2",
                         "--deny", f"{run_id}:3:not today", "--json"))
    assert counts_of(tmp_path / "counts.json").get("step_c", 0) == 0

    def approve_all(event: dict[str, Any]) -> dict[str, Any]:
        if event["type"] == "tool/resumed":             # the audit trail: "C was approved"
            event["decisions"] = [{"id": d["id"], "approved": True} for d in event["decisions"]]
        return event

    _rewrite(log, approve_all)
    code, lines = _seal_lines(log)
    assert code == 1 and len(lines) == 1
    assert "differ from the sealed ones it applied" in lines[0]

    def drop_marker(event: dict[str, Any]) -> dict[str, Any] | None:
        return None if event["type"] == "tool/code-resumed" else event

    _rewrite(log, drop_marker)
    code, lines = _seal_lines(log)
    assert code == 1 and len(lines) == 1 and "without a sealed record of its decisions" in lines[0]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_an_answer_moved_to_another_call_and_tool_is_not_used(tmp_path: Path,
                                                              suffix: str) -> None:
    """A resumption crashed after step_b (or step_c) settled. Its sealed answer, copied to
    the other's call, would tell the program the other ran: the next resumption runs it
    instead, and `log check` reports the forged answer."""
    log, tools, run_id = _paused(tmp_path, suffix)
    killed = cli("resume", str(log), run_id, *tools, "--approve-all",
                 kill_after=("tool/code-dispatch", 1))
    assert killed.returncode == -9, killed.stderr.decode()
    settled = next(e for e in _events(log) if e["type"] == "tool/code-dispatch"
                   and ":resume:" in e["subCallId"])       # step_b or step_c: they run together
    other = {"step_b": ("step_c", "3", "c"), "step_c": ("step_b", "2", "b")}[settled["name"]]
    _append(log, {**settled, "subCallId": settled["subCallId"][:-1] + other[1],
                  "name": other[0], "arguments": {"note": other[2]}})
    Session(log=log).close()     # crash repair (the forged event breaks an invariant too)
    done = codemode("resume", str(log), run_id, *tools, "--approve-all", "--json")
    _resumed_ok(done)
    assert report(done)["stdout"].endswith("b: step_b\nc: dict None\n")
    counts = counts_of(tmp_path / "counts.json")
    assert (counts["step_b"], counts["step_c"]) == (1, 1)     # one from its answer, one ran
    code, lines = _seal_lines(log)
    assert code == 1 and any("does not match its seal" in line for line in lines), lines


@pytest.mark.parametrize("suffix", [".jsonl"])
def test_log_check_says_when_it_has_no_key_and_reports_another_key(
        tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    log, _, run_id = _paused(tmp_path, suffix)
    other = tmp_path / "other" / "seal.key"
    other.parent.mkdir(mode=0o700)
    other.write_text("9f" * 8 + "0123456789abcdef" * 3)
    other.chmod(0o600)
    foreign = codemode("log", "check", str(log), "--seal-key-file", str(other))
    assert foreign.returncode == 1
    assert f"the record of paused run {run_id!r} does not match its seal" in \
        foreign.stdout.decode()
    monkeypatch.setenv("CODEMODE_SEAL_KEY_FILE", str(tmp_path / "none" / "seal.key"))
    unchecked = codemode("log", "check", str(log))
    assert unchecked.returncode == 0
    assert b"seals not checked: no seal key" in unchecked.stderr
    assert not (tmp_path / "none").exists()                 # checking never makes a key
