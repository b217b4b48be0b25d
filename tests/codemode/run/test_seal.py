"""Sealed records of paused runs (docs/codemode.md "Who can change a paused run"): the key
(`SealKey`: given, from the environment, or a file made on first use), and `codemode resume`
refusing a record changed in the log (`RESUME_TAMPERED`, no tool runs) on both backends."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codemode._run.seal import ResumeTampered, SealKey, SealKeyError, default_key_path
from tests.codemode.cli.test_cli import codemode, report
from tests.codemode.cli.test_cli_resume import ASK_POLICY, counter, counts_of
from tests.codemode.run.test_resume import PROGRAM

FIELDS = dict(run_id="r", name="run_code", arguments={"code": "1"},
              requests=[{"id": "r:1", "toolName": "t", "arguments": {"a": 1}}],
              agent=None)


def test_a_key_file_is_made_on_first_use_readable_by_its_owner_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEMODE_SEAL_KEY", raising=False)
    monkeypatch.delenv("CODEMODE_SEAL_KEY_FILE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    path = default_key_path()
    assert path == tmp_path / "config" / "codemode" / "seal.key"
    key = SealKey().value()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(key) == 64 and key == path.read_bytes().strip()
    assert SealKey().value() == key                 # found again, not made again


def test_a_key_file_others_may_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "seal.key"
    path.write_bytes(KEY)
    path.chmod(0o644)
    with pytest.raises(SealKeyError) as caught:
        SealKey(path=path).value()
    assert str(caught.value) == (f"{path}: the seal key file may be read or written by "
                                 "others (mode 0644); make it 0600")


KEY = b"Seal key for tests: 0123456789-ABCDEFGHIJ"
OTHER_KEY = b"Another seal key: zyxwvutsrq-9876543210"


def _key_file(folder: Path) -> Path:
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / "seal.key"
    path.write_bytes(KEY)
    path.chmod(0o600)
    return path


def test_a_key_file_reached_through_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    real = _key_file(tmp_path / "real")
    link = tmp_path / "link.key"
    link.symlink_to(real)
    with pytest.raises(SealKeyError, match="is a symbolic link; name the file itself"):
        SealKey(path=link).value()
    assert SealKey(path=real).value() == KEY


def test_a_key_file_in_a_directory_others_may_write_is_refused(tmp_path: Path) -> None:
    path = _key_file(tmp_path / "shared")
    path.parent.chmod(0o777)
    with pytest.raises(SealKeyError, match=r"directory may be written by others \(mode 0777\)"):
        SealKey(path=path).value()
    path.parent.chmod(0o1777)                # sticky, as /tmp: still others may write it
    with pytest.raises(SealKeyError, match="directory may be written by others"):
        SealKey(path=path).value()
    path.parent.chmod(0o700)
    assert SealKey(path=path).value() == KEY


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="giving a file to another user needs root")
def test_a_key_file_or_directory_another_user_owns_is_refused(tmp_path: Path) -> None:
    path = _key_file(tmp_path / "theirs")
    os.chown(path, 4242, 4242)
    with pytest.raises(SealKeyError, match=r"owned by uid 4242, not by the current user"):
        SealKey(path=path).value()
    os.chown(path, 0, 0)
    os.chown(path.parent, 4242, 4242)
    with pytest.raises(SealKeyError, match=r"directory is owned by uid 4242"):
        SealKey(path=path).value()


def test_a_key_file_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "keys"
    folder.mkdir(mode=0o700)
    os.mkfifo(folder / "seal.key", 0o600)
    with pytest.raises(SealKeyError, match="not a regular file"):
        SealKey(path=folder / "seal.key").value()


@pytest.mark.parametrize("weak", [b"e" * 32, b"ab" * 20, b"0123" * 10])
def test_a_key_without_entropy_is_refused_from_every_source(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weak: bytes) -> None:
    path = _key_file(tmp_path / "weak")
    path.write_bytes(weak)
    with pytest.raises(SealKeyError, match="the seal key is too predictable"):
        SealKey(path=path).value()
    with pytest.raises(SealKeyError, match="too predictable"):
        SealKey(weak).value()
    monkeypatch.setenv("CODEMODE_SEAL_KEY", weak.decode())
    with pytest.raises(SealKeyError, match=r"^CODEMODE_SEAL_KEY: the seal key is too predict"):
        SealKey().value()


def test_keys_from_the_environment_and_too_short_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEMODE_SEAL_KEY", KEY.decode())
    assert SealKey().value() == KEY
    assert SealKey(OTHER_KEY).value() == OTHER_KEY        # given beats the environment
    monkeypatch.setenv("CODEMODE_SEAL_KEY", "short")
    with pytest.raises(SealKeyError) as caught:
        SealKey().value()
    assert caught.value.code == "SEAL_KEY_INVALID"
    assert str(caught.value) == ("CODEMODE_SEAL_KEY: a seal key needs at least 32 bytes "
                                 "(got 5)")


def test_a_seal_covers_every_field_and_survives_a_json_round_trip() -> None:
    key = SealKey(KEY)
    state = {"code": "1", "limits": {"wall_clock_s": 10.0}, "exchanges": [[1, 2]]}
    sealed = key.sealed(state=state, **FIELDS)
    key.check(state=json.loads(json.dumps(sealed)), **FIELDS)
    for field, other in [("run_id", "s"), ("name", "other"), ("arguments", {"code": "2"}),
                         ("requests", []), ("agent", "a")]:
        with pytest.raises(ResumeTampered):
            key.check(state=sealed, **{**FIELDS, field: other})
    with pytest.raises(ResumeTampered):
        key.check(state={**sealed, "code": "2"}, **FIELDS)
    with pytest.raises(ResumeTampered):
        SealKey(OTHER_KEY).check(state=sealed, **FIELDS)
    with pytest.raises(ResumeTampered) as caught:
        key.check(state=state, **FIELDS)
    assert caught.value.code == "RESUME_TAMPERED"


# ---- `codemode resume` of a record changed in the log ---------------------------------

def _program(event: dict[str, Any]) -> None:
    for holder in (event["arguments"], event["state"]):        # both, so they still agree
        holder["code"] = holder["code"].replace('print("start")', 'print("START")')


def _limits(event: dict[str, Any]) -> None:
    event["state"]["limits"]["wall_clock_s"] = 99.0


def _exchange(event: dict[str, Any]) -> None:
    event["state"]["exchanges"][0]["replies"][0]["value"]["count"] = 7


def _tape(event: dict[str, Any]) -> None:
    tape = event["state"]["tape"]
    if tape["entries"]:
        tape["entries"] = tape["entries"][1:]
    else:
        tape["complete"] = False


def _approval(event: dict[str, Any]) -> None:
    event["requests"][1]["arguments"] = {"note": "something else"}


def _seal(event: dict[str, Any]) -> None:
    del event["state"]["seal"]


EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "program": _program, "limits": _limits, "exchange": _exchange, "tape": _tape,
    "approval": _approval, "seal": _seal}


def _edit_suspension(log: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Change the log's `tool/suspended` event in place, as someone with the file would."""
    if log.suffix == ".jsonl":
        lines = log.read_text().splitlines()
        for i, line in enumerate(lines):
            event = json.loads(line)
            if event["type"] == "tool/suspended":
                edit(event)
                lines[i] = json.dumps(event, separators=(",", ":"))
        log.write_text("\n".join(lines) + "\n")
        return
    with sqlite3.connect(log) as db:
        seq, body = db.execute(
            "SELECT seq, body FROM events WHERE type = 'tool/suspended'").fetchone()
        event = json.loads(body)
        edit(event)
        db.execute("UPDATE events SET body = ? WHERE seq = ?", (json.dumps(event), seq))


@pytest.mark.mcp
@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".db", ".jsonl"])
def test_resume_refuses_a_record_changed_in_the_log_and_runs_no_tool(
        tmp_path: Path, suffix: str) -> None:
    (tmp_path / "prog.py").write_text(PROGRAM, encoding="utf-8")
    (tmp_path / "ask.toml").write_text(ASK_POLICY, encoding="utf-8")
    counts = tmp_path / "counts.json"
    tools = ["--mcp", counter(counts), "--policy", str(tmp_path / "ask.toml")]
    original = tmp_path / f"paused{suffix}"
    paused = codemode("run", str(tmp_path / "prog.py"), *tools, "--log", str(original),
                      "--json")
    assert paused.returncode == 3, paused.stderr.decode()
    run_id = report(paused)["run_id"]
    before = counts_of(counts)
    assert before["step_a"] == 1

    for field, edit in EDITS.items():
        log = tmp_path / f"{field}{suffix}"
        log.write_bytes(original.read_bytes())
        _edit_suspension(log, edit)
        resumed = codemode("resume", str(log), run_id, *tools, "--approve-all", "--json")
        assert resumed.returncode == 1, (field, resumed.stderr.decode())
        final = report(resumed)
        assert (field, final["kind"], final["code"], final["error"]["type"]) == (
            field, "resume_tampered", "resume-tampered", "ResumeTampered")
        assert final["subcalls"] == [] and final["stdout"] == ""
        assert counts_of(counts) == before, field              # no tool ran

    # a record sealed with another key is refused; the untouched one resumes
    copy = tmp_path / f"copy{suffix}"
    copy.write_bytes(original.read_bytes())
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CODEMODE_SEAL_KEY", OTHER_KEY.decode())
        foreign = codemode("resume", str(copy), run_id, *tools, "--approve-all", "--json")
        env.setenv("CODEMODE_SEAL_KEY", "e" * 40)               # a key refused outright
        weak = codemode("resume", str(copy), run_id, *tools, "--approve-all", "--json")
    assert report(foreign)["kind"] == "resume_tampered"
    assert weak.returncode != 0 and b"too predictable" in weak.stdout + weak.stderr
    assert counts_of(counts) == before
    # neither failed check used the paused run up: the right key resumes it
    again = codemode("resume", str(copy), run_id, *tools, "--approve-all", "--json")
    assert report(again)["kind"] == "ok", again.stderr.decode()
    assert counts_of(counts)["step_b"] == 1
    copy.unlink()
    before = counts_of(counts)
    resumed = codemode("resume", str(original), run_id, *tools, "--approve-all", "--json")
    assert report(resumed)["kind"] == "ok", resumed.stderr.decode()
    assert counts_of(counts)["step_b"] == before["step_b"] + 1


def test_a_run_that_may_pause_refuses_a_weak_key_before_it_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "prog.py").write_text("print('start')\nsleep_ms(ms=1)\n", encoding="utf-8")
    (tmp_path / "ask.toml").write_text('[[rules]]\ntool = "sleep_ms"\naction = "ask"\n')
    monkeypatch.setenv("CODEMODE_SEAL_KEY", "a" * 40)
    done = codemode("run", str(tmp_path / "prog.py"), "--builtin", "--policy",
                    str(tmp_path / "ask.toml"), "--log", str(tmp_path / "s.jsonl"))
    assert done.returncode == 2, done.stderr.decode()
    assert b"SealKeyError: CODEMODE_SEAL_KEY: the seal key is too predictable" in done.stderr
    assert done.stdout == b""                        # nothing ran
