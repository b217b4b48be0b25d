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

KEY_E = b"3f9c1d0a7be24e58a61f0c93d7e2b4a5"
KEY_G = b"b8e1f04c2d9a73e6c5f1a08d4b7e92c3f6a1d0e5"
KEY_K = b"e4a7c2f91b0d68357af2c9e01d4b8a63"

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
    path.write_text("k" * 40)
    path.chmod(0o644)
    with pytest.raises(SealKeyError) as caught:
        SealKey(path=path).value()
    assert str(caught.value) == (f"{path}: the seal key file may be read or written by "
                                 "others (mode 0644); make it 0600")


def _private_file(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_a_key_file_reached_through_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    target = _private_file(tmp_path / "real.key", KEY_K.decode())
    link = tmp_path / "seal.key"
    link.symlink_to(target)
    with pytest.raises(SealKeyError) as caught:
        SealKey(path=link).value()
    assert str(caught.value) == (f"{link}: the seal key file is a symbolic link; a key is "
                                 "read only from a regular file, not through a link")
    dangling = tmp_path / "dangling.key"           # not created through a dangling link
    dangling.symlink_to(tmp_path / "elsewhere.key")
    with pytest.raises(SealKeyError, match="symbolic link"):
        SealKey(path=dangling).value()
    assert not (tmp_path / "elsewhere.key").exists()
    assert SealKey(path=target).value() == KEY_K


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="giving a file to another user needs root")
def test_a_key_file_or_directory_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "keys"
    directory.mkdir(mode=0o700)
    path = _private_file(directory / "seal.key", KEY_K.decode())
    os.chown(path, 12345, -1)
    with pytest.raises(SealKeyError) as caught:
        SealKey(path=path).value()
    assert str(caught.value) == (f"{path}: the seal key file is owned by another user "
                                 f"(uid 12345, this process runs as uid 0), who could have "
                                 "written it")
    os.chown(path, 0, -1)
    os.chown(directory, 12345, -1)
    with pytest.raises(SealKeyError, match="directory .* is owned by another user "
                                           r"\(uid 12345\), who could replace the key"):
        SealKey(path=path).value()


def test_a_key_file_in_a_directory_others_may_write_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "shared"
    directory.mkdir()
    path = _private_file(directory / "seal.key", KEY_K.decode())
    for mode in (0o777, 0o1777, 0o770):
        directory.chmod(mode)
        with pytest.raises(SealKeyError) as caught:
            SealKey(path=path).value()
        assert str(caught.value) == (
            f"{path}: the seal key file's directory {directory} may be written by others "
            f"(mode {mode:04o}), who could replace the key; make it 0700")
    fresh = directory / "new.key"                  # nor is one made there
    with pytest.raises(SealKeyError, match="may be written by others"):
        SealKey(path=fresh).value()
    assert not fresh.exists()
    directory.chmod(0o755)
    assert SealKey(path=path).value() == KEY_K


def test_a_key_without_entropy_is_refused_from_every_source(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _private_file(tmp_path / "seal.key", "a" * 64 + "\n")
    with pytest.raises(SealKeyError) as caught:
        SealKey(path=path).value()
    assert str(caught.value) == (
        f"{path}: the seal key is too predictable (about 0 bits of entropy by its bytes' "
        "frequencies, at least 96 needed); use random bytes, e.g. the output of: "
        "python -c 'import secrets; print(secrets.token_hex(32))'")
    _private_file(path, "abab" * 16)                 # 64 bits: two values, 64 times
    with pytest.raises(SealKeyError, match="about 64 bits"):
        SealKey(path=path).value()
    with pytest.raises(SealKeyError, match=r"^the seal key: the seal key is too predictable"):
        SealKey(b"\x00" * 32).value()
    monkeypatch.setenv("CODEMODE_SEAL_KEY", "e" * 32)
    with pytest.raises(SealKeyError, match=r"^CODEMODE_SEAL_KEY: the seal key is too"):
        SealKey().value()


def test_keys_from_the_environment_and_too_short_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEMODE_SEAL_KEY", KEY_E.decode())
    assert SealKey().value() == KEY_E
    assert SealKey(KEY_G).value() == KEY_G        # given beats the environment
    monkeypatch.setenv("CODEMODE_SEAL_KEY", "short")
    with pytest.raises(SealKeyError) as caught:
        SealKey().value()
    assert caught.value.code == "SEAL_KEY_INVALID"
    assert str(caught.value) == ("CODEMODE_SEAL_KEY: a seal key needs at least 32 bytes "
                                 "(got 5)")


def test_a_seal_covers_every_field_and_survives_a_json_round_trip() -> None:
    key = SealKey(KEY_K)
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
        SealKey(KEY_G).check(state=sealed, **FIELDS)
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
        env.setenv("CODEMODE_SEAL_KEY", "another key, of at least 32 bytes")
        foreign = codemode("resume", str(copy), run_id, *tools, "--approve-all", "--json")
    assert report(foreign)["kind"] == "resume_tampered"
    assert counts_of(counts) == before
    resumed = codemode("resume", str(original), run_id, *tools, "--approve-all", "--json")
    assert report(resumed)["kind"] == "ok", resumed.stderr.decode()
    assert counts_of(counts)["step_b"] == 1
