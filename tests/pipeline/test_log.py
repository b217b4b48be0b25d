import re
import threading
from pathlib import Path

import pytest

from codemode.pipeline import LogClosedError, LogCorruptError, open_log
from codemode.pipeline.events import (
    CodeDispatchStart,
    StepStart,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    decode_event,
    encode_event,
)
from codemode.pipeline.log import (
    OUTCOME_UNKNOWN_MESSAGE,
    JsonlLog,
    MemoryLog,
    SqliteLog,
    load,
    log_format,
)


def tool_call(call_id: str = "c1") -> ToolCall:
    return ToolCall(turn=1, step=1, call_id=call_id, name="echo", arguments='{"a": 1}')


def test_backend_is_chosen_by_suffix(tmp_path):
    assert isinstance(open_log(None), MemoryLog)
    assert isinstance(open_log(tmp_path / "a.db"), SqliteLog)
    assert isinstance(open_log(tmp_path / "a.sqlite"), SqliteLog)
    assert isinstance(open_log(tmp_path / "a.jsonl"), JsonlLog)
    with pytest.raises(ValueError):
        open_log(tmp_path / "a.txt")


@pytest.mark.parametrize(("name", "kind"), [
    ("a.db", "sqlite"), ("a.SQLITE", "sqlite"), ("a.sqlite3", "sqlite"), ("a.jsonl", "jsonl"),
    ("A.JSONL", "jsonl"), ("a.txt", None), ("a", None), ("a.jsonl.bak", None), (".db", None)])
def test_one_rule_names_the_backend_for_opening_loading_and_checking(tmp_path, name, kind):
    path = tmp_path / name
    if kind is None:
        for refuses in (log_format, open_log, load):
            with pytest.raises(ValueError, match="unknown session log type"):
                refuses(path)
        assert not path.exists()
        return
    assert log_format(path) == kind
    with open_log(path) as log:
        assert isinstance(log, SqliteLog if kind == "sqlite" else JsonlLog)
    assert load(path) == []


@pytest.mark.log_unchecked("hand-made events: a sub-call left unsettled, a turn left open")
def test_append_assigns_seq_and_time_and_events_survive_reopen(log_path):
    with open_log(log_path) as log:
        first = log.append(TurnStart(turn=1))
        second = log.append(
            CodeDispatchStart(
                root_call_id="r",
                parent_call_id="r",
                sub_call_id="r:code:1",
                name="echo",
                arguments={"k": [1, 2]},
            )
        )
        assert (first.seq, second.seq) == (1, 2)
        assert second.time >= first.time > 0
        third = log.append(TurnEnd(turn=1))
    with open_log(log_path) as log:
        assert log.read() == [first, second, third]
        assert log.append(TurnStart(turn=2)).seq == 4


def test_event_json_is_camel_case_with_type_tag():
    data = encode_event(tool_call())
    assert data.startswith(b'{"type":"tool/call","turn":1,"step":1,"callId":"c1"')
    assert decode_event(data) == tool_call()


def test_recovery_closes_every_dangling_call(log_path):
    with open_log(log_path) as log:
        log.append(TurnStart(turn=1))
        log.append(StepStart(turn=1, step=1))
        call = log.append(tool_call("c1"))       # and no tool/result: a crash
    with open_log(log_path) as log:
        events = log.read()
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert result.error is not None and result.error.code == "TOOL_OUTCOME_UNKNOWN"
    assert result.is_error is True
    assert result.call_id == "c1"
    assert result.source_event_seqs == (call.seq,)
    assert result.content == ({"type": "text", "text": f"Error: {OUTCOME_UNKNOWN_MESSAGE}"},)
    assert [type(e).__name__ for e in events[-2:]] == ["StepEnd", "TurnEnd"]
    assert events[-1].reason == "interrupted"


def test_recovery_settles_every_started_sub_call_before_its_outer_call(log_path):
    from codemode.pipeline.events import CodeDispatch

    def start(n: int) -> CodeDispatchStart:
        return CodeDispatchStart(root_call_id="c1", parent_call_id="c1", sub_call_id=f"c1:code:{n}",
                                 name="echo", arguments={"n": n})

    with open_log(log_path) as log:
        log.append(TurnStart(turn=1))
        log.append(StepStart(turn=1, step=1))
        log.append(tool_call("c1"))
        log.append(start(1))
        log.append(CodeDispatch(root_call_id="c1", parent_call_id="c1", sub_call_id="c1:code:1",
                                name="echo", arguments={"n": 1}, is_error=False, content=()))
        log.append(start(2))
        log.append(start(3))                      # killed while sub-calls 2 and 3 ran
    with open_log(log_path) as log:
        events = log.read()
        repaired = log.repaired
    assert [type(e).__name__ for e in repaired] == ["CodeDispatch", "CodeDispatch", "ToolResult",
                                                    "StepEnd", "TurnEnd"]
    two, three = repaired[:2]
    assert (two.sub_call_id, three.sub_call_id) == ("c1:code:2", "c1:code:3")
    assert (two.is_error, two.code, two.arguments) == (True, "TOOL_OUTCOME_UNKNOWN", {"n": 2})
    assert two.content == ({"type": "text", "text": f"Error: {OUTCOME_UNKNOWN_MESSAGE}"},)
    assert (two.root_call_id, two.parent_call_id, two.name) == ("c1", "c1", "echo")
    assert events[-5:] == repaired
    with open_log(log_path) as log:                # repaired once: a clean log now
        assert log.repaired == []


def test_a_clean_log_is_not_repaired(log_path):
    with open_log(log_path) as log:
        log.append(TurnStart(turn=1))
        log.append(TurnEnd(turn=1))
    with open_log(log_path) as log:
        assert log.repaired == []
        assert len(log.read()) == 2


def test_corrupt_jsonl_line_names_file_and_line(tmp_path):
    path = tmp_path / "s.jsonl"
    with open_log(path) as log:
        log.append(TurnStart(turn=1))
    with open(path, "ab") as f:
        f.write(b'{"type":"turn/start","turn":"one"}\n')
        f.write(b'{"type":"turn/end","turn":1,"seq":3,"time":1.0}\n')
    with pytest.raises(LogCorruptError) as info:
        open_log(path)
    assert info.value.path == str(path)
    assert info.value.position == 2
    assert str(info.value).startswith(f"corrupt session log {path} at line 2: ")


def test_torn_last_jsonl_line_is_dropped(tmp_path):
    path = tmp_path / "s.jsonl"
    with open_log(path) as log:
        log.append(TurnStart(turn=1))
    with open(path, "ab") as f:
        f.write(b'{"type":"turn/end","tu')
    with open_log(path) as log:
        events = log.read()
    assert [type(e).__name__ for e in events] == ["TurnStart", "TurnEnd"]
    assert events[-1].reason == "interrupted"


@pytest.mark.parametrize(("name", "data"), [
    ("notes.jsonl", b"not json at all\nsecond line, important, with no newline"),
    ("random.jsonl", bytes(range(256)) * 16),
    ("early.jsonl", b'{"type":"turn/start","turn":1,"seq":1,"time":1.0}\n'
                    b'garbage\n{"type":"turn/end","tu'),
    ("random.db", bytes(range(256)) * 16),
    ("text.db", b"this is not sqlite\n" * 100),
])
def test_a_file_refused_as_corrupt_is_left_as_it_was(tmp_path, name, data):
    # a torn last line is cut only from a log whose other lines are events: a file that is
    # not a log is never "repaired" into one
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(LogCorruptError):
        open_log(path)
    assert path.read_bytes() == data


@pytest.mark.parametrize(("schema", "said"), [
    ("CREATE TABLE notes (day TEXT, text TEXT)",
     "it holds tables or views other than 'events' (notes)"),
    ("CREATE TABLE events (id INTEGER, what TEXT)",
     "its 'events' table has the columns (id, what), not (seq, type, time, body)"),
    ("CREATE VIEW answer AS SELECT 42", "it holds tables or views other than 'events' (answer)"),
])
def test_a_database_of_ones_own_is_not_made_into_a_log(tmp_path, schema, said):
    import sqlite3
    from contextlib import closing

    path = tmp_path / "own.db"
    with closing(sqlite3.connect(path)) as db:
        db.execute(schema)
        if "TABLE" in schema:
            db.execute(f"INSERT INTO {schema.split()[2]} VALUES ('a', 'b')")
        db.commit()
    data = path.read_bytes()
    for opening in (open_log, load):
        with pytest.raises(LogCorruptError, match=f"not a session log: {re.escape(said)}"):
            opening(path)
    assert path.read_bytes() == data                        # not a table, not a journal mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["own.db"]


def test_corrupt_sqlite_row_names_file_and_seq(tmp_path):
    import sqlite3

    path = tmp_path / "s.db"
    with open_log(path) as log:
        log.append(TurnStart(turn=1))
        log.append(TurnEnd(turn=1))
    db = sqlite3.connect(path)
    db.execute("UPDATE events SET body = '{not json' WHERE seq = 2")
    db.commit()
    db.close()
    with pytest.raises(LogCorruptError) as info:
        open_log(path)
    assert (info.value.path, info.value.position) == (str(path), 2)
    assert str(info.value).startswith(f"corrupt session log {path} at row 2: ")


def test_not_a_database_is_a_corrupt_log(tmp_path):
    path = tmp_path / "s.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(LogCorruptError):
        open_log(path)


def test_closed_log_refuses_appends(log_path):
    log = open_log(log_path)
    log.close()
    log.close()
    with pytest.raises(LogClosedError):
        log.append(TurnStart(turn=1))


@pytest.mark.log_unchecked("hand-made events: calls outside any step")
def test_concurrent_appends_get_unique_consecutive_seqs(log_path):
    with open_log(log_path) as log:
        def worker(k: int) -> None:
            for i in range(50):
                log.append(tool_call(f"c{k}-{i}"))
                log.append(TurnStart(turn=k))

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seqs = [e.seq for e in log.read()]
    assert seqs[:400] == list(range(1, 401))


@pytest.mark.parametrize("name", ["session.jsonl", "session.db"])
def test_a_second_writer_of_the_same_log_is_refused(tmp_path, name):
    import subprocess
    import sys

    from codemode.pipeline import LogInUseError

    path = tmp_path / name
    with open_log(str(path)):
        with pytest.raises(LogInUseError) as caught:
            open_log(str(path))
        assert caught.value.code == "LOG_IN_USE"
        other = subprocess.run(
            [sys.executable, "-c",
             f"from codemode.pipeline import open_log; open_log({str(path)!r})"],
            capture_output=True,
            text=True,
            cwd=str(__import__("pathlib").Path(__file__).parents[2]),
        )
        assert other.returncode != 0 and "is in use by another session or process" in other.stderr
    with open_log(str(path)) as reopened:           # released on close
        assert reopened.read() == []


@pytest.mark.parametrize("name", ["session.jsonl", "session.db"])
@pytest.mark.parametrize("link", ["symbolic link", "hard link", "linked directory",
                                  "other spelling"])
def test_a_second_writer_through_another_path_to_the_file_is_refused(tmp_path, name, link):
    import os
    import subprocess
    import sys

    from codemode.pipeline import LogInUseError

    path = tmp_path / name
    with open_log(str(path)) as first:
        first.append(TurnStart(turn=1))
        if link == "symbolic link":
            other = tmp_path / f"other-{name}"
            other.symlink_to(path)
        elif link == "hard link":
            other = tmp_path / f"other-{name}"
            os.link(path, other)
        elif link == "linked directory":
            (tmp_path / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
            other = tmp_path / "elsewhere" / name
        else:
            (tmp_path / "sub").mkdir()
            other = tmp_path / "sub" / ".." / "." / name
        with pytest.raises(LogInUseError, match="in use by another session or process"):
            open_log(str(other))
        done = subprocess.run(
            [sys.executable, "-c",
             f"from codemode.pipeline import open_log; open_log({str(other)!r})"],
            capture_output=True, text=True, cwd=str(Path(__file__).parents[2]))
        assert done.returncode != 0 and "is in use by another session" in done.stderr
        first.append(TurnEnd(turn=1))
    with open_log(str(other)) as reopened:        # released on close, whatever the path
        assert [e.seq for e in reopened.read()] == [1, 2]


@pytest.mark.parametrize("name", ["session.jsonl", "session.db"])
def test_the_lock_file_exists_only_while_the_log_is_open(tmp_path, name):
    from codemode.pipeline import LogInUseError

    path = tmp_path / name
    lock = tmp_path / f"{name}.lock"
    with open_log(str(path)):
        assert lock.exists()
    assert not lock.exists()
    with open_log(str(path)), pytest.raises(LogInUseError):   # a second session, after
        open_log(str(path))                                    # a clean close
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_a_lock_file_left_by_a_crash_is_reused(tmp_path):
    path = tmp_path / "session.jsonl"
    (tmp_path / "session.jsonl.lock").write_bytes(b"")   # its process died holding it
    with open_log(str(path)) as log:
        assert log.read() == []
    assert not (tmp_path / "session.jsonl.lock").exists()


def test_an_opener_that_locked_a_removed_lock_file_opens_the_path_again(tmp_path, monkeypatch):
    import os

    from codemode.pipeline.log import _lock

    path = str(tmp_path / "session.jsonl")
    removed = tmp_path / "removed.lock"
    removed.write_bytes(b"")
    real_open, opened = os.open, []

    def open_(name, *args):
        opened.append(name)
        if len(opened) == 1:      # as if the previous holder removed the file after our open
            fd = real_open(str(removed), *args)
            removed.unlink()
            return fd
        return real_open(name, *args)

    monkeypatch.setattr(_lock.os, "open", open_)
    lock = _lock.WriterLock(path)
    monkeypatch.undo()
    assert opened == [f"{path}.lock", f"{path}.lock", path]     # then the log file itself
    assert os.path.exists(f"{path}.lock")
    lock.release()
    assert not os.path.exists(f"{path}.lock")


@pytest.mark.log_unchecked("hand-made events: calls outside any step")
def test_a_watcher_sees_every_event_once_in_order_also_while_others_append(log_path):
    with open_log(log_path) as log:
        for i in range(20):
            log.append(tool_call(f"early-{i}"))
        seen = []
        started = threading.Event()

        def worker(k: int) -> None:
            started.set()
            for i in range(50):
                log.append(tool_call(f"c{k}-{i}"))

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        started.wait(timeout=60)
        log.watch(seen.append)          # while the workers append
        for t in threads:
            t.join()
        assert seen == log.read()
        assert [e.seq for e in seen] == list(range(1, 171))
        log.close()
        with pytest.raises(LogClosedError):
            log.watch(seen.append)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("name", ["s.db", "s.jsonl"])
def test_a_log_that_cannot_be_opened_for_writing_is_a_log_error_naming_it(name):
    from codemode.pipeline import LogError, LogInUseError

    with pytest.raises(LogError, match=f"session log /proc/{name} cannot be opened for "
                                       "writing: ") as info:
        open_log(f"/proc/{name}")
    assert not isinstance(info.value, LogInUseError)


@pytest.mark.parametrize("name", ["d.db", "d.jsonl", "d"])
def test_load_says_the_same_of_a_directory_and_of_a_missing_file_whatever_the_suffix(
        tmp_path, name):
    (tmp_path / name).mkdir()
    with pytest.raises(IsADirectoryError, match="is a directory, not a log file"):
        load(tmp_path / name)
    if name != "d":
        with pytest.raises(FileNotFoundError, match=f"^no such file: .*missing-{name}$"):
            load(tmp_path / f"missing-{name}")



@pytest.mark.parametrize("name", ["f.db", "f.jsonl"])
def test_a_fifo_is_not_a_log_and_opening_it_does_not_wait(tmp_path, name):
    import os

    from codemode.pipeline import LogError

    path = tmp_path / name
    os.mkfifo(path)
    outcome: list[BaseException] = []

    def opening() -> None:
        for opens in (open_log, load):
            try:
                opens(path)
            except BaseException as exc:    # what each raised, checked below
                outcome.append(exc)

    worker = threading.Thread(target=opening, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "opening a FIFO as a log waited for a writer"
    assert [type(e) for e in outcome] == [LogError, LogError]
    assert all("is not a regular file" in str(e) for e in outcome)
