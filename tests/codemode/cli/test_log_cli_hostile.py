"""`codemode log check`, `log show` and `resume` on logs that cannot be read or appended to:
exit 2 with one line on stderr, never a traceback; 1 stays "found violations"."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.pipeline import events, open_log
from tests.codemode.cli.test_cli import codemode

# Past the decoder on every supported Python: on 3.13, msgspec follows more than 5,000 levels.
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("command", [("log", "check"), ("log", "check", "--partial"),
                                     ("log", "show")])
def test_a_log_nested_too_deeply_could_not_be_read_exit_2(tmp_path: Path,
                                                          command: tuple[str, ...]) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text('{"type":"tool/code-dispatch-start","seq":1,"time":1,"rootCallId":"c",'
                    '"parentCallId":"c","subCallId":"c:code:1","name":"echo","arguments":'
                    + DEEP + "}\n")
    done = codemode(*command, str(path))
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        f"error: corrupt session log {path} at line 1: JSON nested too deeply to decode"]
    assert done.stdout == b""


@pytest.mark.log_unchecked("out of order on purpose")
def test_resume_refuses_a_log_out_of_order_and_check_says_why(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with open_log(path) as log:
        log.append(events.TurnStart(turn=1))
        log.append(events.TurnEnd(turn=1))
    first, second = path.read_text().splitlines()
    path.write_text(f"{second}\n{first}\n")
    checked = codemode("log", "check", "--partial", str(path))
    assert checked.returncode == 1
    assert checked.stdout.decode().splitlines()[0] == "seq 2: SEQ_OUT_OF_ORDER: seq 2 follows seq 0"
    resumed = codemode("resume", str(path), "r", "--approve-all", "--builtin")
    assert resumed.returncode == 2
    assert b"Traceback" not in resumed.stderr
    assert (f"corrupt session log {path} at event 1: seq 2 where seq 1 belongs: the log is "
            "out of order and cannot be appended to").encode() in resumed.stderr


@pytest.mark.parametrize(("journal", "side_file"), [("delete", "journal"), ("wal", "wal")])
def test_a_hot_journal_is_read_by_check_and_show(tmp_path: Path, journal: str,
                                                 side_file: str) -> None:
    """A writer killed mid-transaction, in rollback-journal mode (a hot `-journal`) or in
    the write-ahead-log mode the log's own writer sets (uncommitted frames in `-wal`)."""
    import signal
    import subprocess
    import sys

    path = tmp_path / "s.db"
    with open_log(path) as log:
        log.append(events.TurnStart(turn=1))
        log.append(events.TurnEnd(turn=1))
    killer = (f"import os, signal, sqlite3\ndb = sqlite3.connect({str(path)!r}, "
              "isolation_level=None)\n"
              f"db.execute('PRAGMA journal_mode = {journal}')\n"
              "db.execute('PRAGMA cache_size = 1')\n"
              "db.execute('BEGIN')\nfor n in range(100, 400):\n"
              "    db.execute(\"INSERT INTO events VALUES (?, 'x', 0, ?)\", (n, 'x' * 4000))\n"
              f"os.kill(os.getpid(), {int(signal.SIGKILL)})\n")
    subprocess.run([sys.executable, "-c", killer], check=False)
    assert (tmp_path / f"s.db-{side_file}").stat().st_size > 0
    checked = codemode("log", "check", "--partial", str(path))
    assert checked.returncode == 0, checked.stderr.decode()
    assert checked.stdout.decode() == f"{path}: 2 events, no violations\n"
    shown = codemode("log", "show", str(path))
    assert shown.returncode == 0, shown.stderr.decode()
