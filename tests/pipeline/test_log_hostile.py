"""Session logs that were tampered with, cut short or left by a killed writer: every reader
answers `LogCorruptError` (or reads what is there), never an untyped exception; crash repair
closes what a crash left open (docs/pipeline-spec.md §10)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from codemode.pipeline import LogCorruptError, PendingApproval, ResumeError, Session, events
from codemode.pipeline.log import Violation, ViolationKind, check, load, open_log

from conftest import make_tool

# Past the decoder on every supported Python: on 3.13, msgspec follows more than 5,000 levels.
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(autouse=True)
def default_recursion_limit():
    """CPython's default recursion limit while each test runs: how deep the decoder follows
    depends on it, and a test run earlier in the same process may have left it raised."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(before)


def a_log(path: Path, n_turns: int = 1) -> list[events.Event]:
    """A sound log of `n_turns` turns of one step holding nothing, written at `path`."""
    with open_log(path) as log:
        for turn in range(1, n_turns + 1):
            log.append(events.TurnStart(turn=turn))
            log.append(events.StepStart(turn=turn, step=1))
            log.append(events.StepEnd(turn=turn, step=1))
            log.append(events.TurnEnd(turn=turn))
        return log.read()


def dispatch_body(seq: int, arguments: str) -> str:
    return (f'{{"type":"tool/code-dispatch-start","seq":{seq},"time":1,"rootCallId":"c",'
            f'"parentCallId":"c","subCallId":"c:code:1","name":"echo","arguments":{arguments}}}')


def both_readers_refuse(path: Path, match: str) -> None:
    """`load` and opening for writing both raise `LogCorruptError` matching `match`."""
    with pytest.raises(LogCorruptError, match=match):
        load(path)
    with pytest.raises(LogCorruptError, match=match):
        open_log(path)
    with pytest.raises(LogCorruptError, match=match):
        Session(log=path)


@pytest.mark.log_unchecked("nested deeper than the decoder follows at the default limit")
def test_deep_nesting_in_a_jsonl_log_is_corrupt_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(dispatch_body(1, DEEP) + "\n")
    both_readers_refuse(path, r"at line 1: JSON nested too deeply to decode")


@pytest.mark.log_unchecked("nested deeper than the decoder follows at the default limit")
def test_deep_nesting_in_a_sqlite_log_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    a_log(path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE events SET body = ? WHERE seq = 2", (dispatch_body(2, DEEP),))
    both_readers_refuse(path, r"at row 2: JSON nested too deeply to decode")


@pytest.mark.parametrize(("body", "said"), [
    (None, "not NoneType"), (7, "not int"), (b"\xff\x00", "malformed|invalid|truncated")])
def test_a_sqlite_body_that_is_not_event_text_is_corrupt(tmp_path: Path, body: Any,
                                                         said: str) -> None:
    path = tmp_path / "s.db"
    with sqlite3.connect(path) as db:      # the schema without NOT NULL: a hand-made file
        db.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, type TEXT, time REAL, "
                   "body)")
        db.execute("INSERT INTO events VALUES (1, 'turn/start', 1, ?)", (body,))
    both_readers_refuse(path, rf"at row 1: .*({said})")


def test_a_sqlite_file_cut_short_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    a_log(path, n_turns=400)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    both_readers_refuse(path, r"corrupt session log .*s\.db at row 0: ")


def test_a_result_with_no_block_is_corrupt_not_an_index_error(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = [
        '{"type":"turn/start","seq":1,"time":1,"turn":1}',
        '{"type":"step/start","seq":2,"time":1,"turn":1,"step":1}',
        '{"type":"tool/call","seq":3,"time":1,"turn":1,"step":1,"callId":"c","name":"x",'
        '"arguments":"{}"}',
        '{"type":"tool/result","seq":4,"time":1,"turn":1,"step":1,"message":{"id":"m",'
        '"role":"user","source":{"kind":"tool"},"content":[]}}',
    ]
    path.write_text("\n".join(lines) + "\n")
    both_readers_refuse(path, r"at line 4: Expected `array` of length >= 1 - at "
                              r"`\$.message.content`")


def test_a_sqlite_row_key_that_is_not_its_events_seq_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    a_log(path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE events SET seq = 9 WHERE seq = 4")
    both_readers_refuse(path, r"at row 9: the row holds the event of seq 4")


def test_an_events_view_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    a_log(path)
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE events RENAME TO stored")
        db.execute("CREATE VIEW events AS SELECT * FROM stored")
    both_readers_refuse(path, r"at row 0: 'events' is a view, not a table")


@pytest.mark.log_unchecked("out of order on purpose")
@pytest.mark.parametrize("suffix", [".jsonl", ".db"])
def test_a_log_out_of_order_is_checked_but_not_appended_to(tmp_path: Path,
                                                           suffix: str) -> None:
    path = tmp_path / f"s{suffix}"
    a_log(path)
    if suffix == ".jsonl":
        lines = path.read_text().splitlines()
        path.write_text("\n".join([lines[0], lines[2], lines[1], lines[3]]) + "\n")
    else:
        with sqlite3.connect(path) as db:   # a gap: seq 3 is gone
            db.execute("DELETE FROM events WHERE seq = 3")
    assert ViolationKind.SEQ_OUT_OF_ORDER in [v.kind for v in check(load(path))]
    with pytest.raises(LogCorruptError, match=r"at event 2: seq \d where seq 2 belongs|"
                                              r"at event 3: seq 4 where seq 3 belongs"):
        open_log(path)


def test_repair_closes_every_open_step_of_the_turn(tmp_path: Path) -> None:
    """Two concurrent batches of one turn, then the process died: both steps are closed."""
    path = tmp_path / "s.jsonl"
    with open_log(path) as log:
        log.append(events.TurnStart(turn=1))
        log.append(events.StepStart(turn=1, step=1))
        log.append(events.StepStart(turn=1, step=2))
        log.append(events.ToolCall(turn=1, step=1, call_id="a", name="x", arguments="{}"))
        log.append(events.ToolCall(turn=1, step=2, call_id="b", name="x", arguments="{}"))
    with open_log(path) as log:
        repaired = [(type(e).__name__, getattr(e, "step", None)) for e in log.repaired]
    assert repaired == [("ToolResult", 1), ("ToolResult", 2), ("StepEnd", 1), ("StepEnd", 2),
                        ("TurnEnd", None)]
    assert check(load(path)) == []


def test_check_notices_a_turn_that_ends_with_a_step_open() -> None:
    log = [events.TurnStart(seq=1, turn=1), events.StepStart(seq=2, turn=1, step=1),
           events.StepStart(seq=3, turn=1, step=2), events.StepEnd(seq=4, turn=1, step=1),
           events.TurnEnd(seq=5, turn=1)]
    assert check(log) == [Violation(
        kind=ViolationKind.UNCLOSED_STEP, seq=5, message="turn 1 ends before step 2 ended")]


def suspending(session: Session) -> Any:
    async def body(args: Any, ctx: Any) -> Any:
        if ctx.resumption is None:
            session.log.append(events.ToolSuspended(
                run_id=ctx.execution.call_id, call_id=ctx.execution.call_id, name="job",
                arguments=dict(args), state={"step": 1},
                requests=(PendingApproval(id="r:1", tool_name="job", arguments={}),)))
            return {"status": "pending"}
        return {"status": "done", "call": ctx.execution.call_id}
    return make_tool("job", body, resumable=True)


@pytest.mark.parametrize("died_after", ["tool/resumed", "turn/start", "step/start"])
@pytest.mark.parametrize("suffix", [".jsonl", ".db"])
async def test_a_resumption_that_died_before_its_call_gives_the_suspension_back(
        tmp_path: Path, suffix: str, died_after: str) -> None:
    path = tmp_path / f"s{suffix}"
    session = Session(log=path)
    session.register(suspending(session))
    await session.call("job", {}, call_id="r")
    session.log.append(events.ToolResumed(run_id="r", call_id="r:resume:1", decisions=()))
    if died_after != "tool/resumed":
        session.begin_turn()
    if died_after == "step/start":
        session.log.append(events.StepStart(turn=2, step=2))
    session.log.close()                                   # the process is gone

    reopened = Session(log=path)
    reopened.register(suspending(reopened))
    done = await reopened.resume("r", {"r:1": True})
    assert done.value == {"status": "done", "call": "r:resume:2"}
    with pytest.raises(ResumeError, match="already resumed"):
        await reopened.resume("r", {"r:1": True})
    reopened.close()
    assert check(load(path)) == []


def test_an_sqlite_log_is_written_ahead_and_keeps_what_a_killed_writer_committed(
        tmp_path: Path) -> None:
    """Appends are write-ahead-log commits (not a synced rollback journal each): a writer
    killed mid-transaction loses only that transaction; a reader and the next writer see
    every committed event, and the next writer's log checks clean."""
    path = tmp_path / "s.db"
    with open_log(path) as log:
        db = log._db                                      # type: ignore[attr-defined]
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("PRAGMA synchronous").fetchone() == (1,)       # NORMAL
    sound = a_log(path, n_turns=2)
    killer = textwrap.dedent(f"""
        import os, signal
        from codemode.pipeline import events
        from codemode.pipeline.log import open_log
        log = open_log({str(path)!r})
        log.append(events.TurnStart(turn=3))
        log._db.execute("BEGIN")
        for n in range(100, 400):
            log._db.execute("INSERT INTO events VALUES (?, 'x', 0, ?)", (n, "x" * 4000))
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    subprocess.run([sys.executable, "-c", killer], check=False)
    committed = load(path)
    assert committed[:-1] == sound and committed[-1].seq == len(sound) + 1
    assert isinstance(committed[-1], events.TurnStart)
    with open_log(path) as log:                  # the next writer closes the turn
        assert log.read()[:len(committed)] == committed
        assert isinstance(log.repaired[-1], events.TurnEnd)
    assert check(load(path)) == []


def test_a_database_without_a_write_ahead_log_keeps_every_commit_synced(
        tmp_path: Path) -> None:
    """Syncing only at checkpoints is safe with a write-ahead log alone: where the mode
    cannot be set (here an in-memory database, whose journal stays "memory"), commits stay
    fully synced."""
    with open_log(tmp_path / "s.db") as log:
        saved = log._db                                   # type: ignore[attr-defined]
        log._db = sqlite3.connect(":memory:")             # type: ignore[attr-defined]
        try:
            log._fast_commits()                           # type: ignore[attr-defined]
            db = log._db                                  # type: ignore[attr-defined]
            assert db.execute("PRAGMA journal_mode").fetchone() == ("memory",)
            assert db.execute("PRAGMA synchronous").fetchone() == (2,)       # FULL
        finally:
            log._db.close()                               # type: ignore[attr-defined]
            log._db = saved                               # type: ignore[attr-defined]


def test_a_hot_journal_is_rolled_back_in_a_copy_by_readers(tmp_path: Path) -> None:
    """A writer killed mid-transaction of a file in rollback-journal mode (one written
    where write-ahead logging was not available) leaves `<file>-journal`: a read-only
    reader cannot roll it back in place, but reads what was committed; a writer rolls it
    back."""
    path = tmp_path / "s.db"
    sound = a_log(path, n_turns=2)
    killer = textwrap.dedent(f"""
        import os, signal, sqlite3
        db = sqlite3.connect({str(path)!r}, isolation_level=None)
        assert db.execute("PRAGMA journal_mode = DELETE").fetchone() == ("delete",)
        db.execute("PRAGMA cache_size = 1")     # spill changed pages into the file itself
        db.execute("BEGIN")
        for n in range(100, 400):
            db.execute("INSERT INTO events VALUES (?, 'x', 0, ?)", (n, "x" * 4000))
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    subprocess.run([sys.executable, "-c", killer], check=False)
    journal = tmp_path / "s.db-journal"
    assert journal.is_file() and journal.stat().st_size > 0
    assert load(path) == sound
    assert journal.is_file()                     # the reader did not touch the file
    with open_log(path) as log:                  # a writer rolls it back
        assert log.read() == sound
    assert check(load(path)) == []
