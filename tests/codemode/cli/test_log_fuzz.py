"""Mutated session logs, JSONL and SQLite, read back by every reader: `load`, `check`,
opening for writing (crash repair) and the CLI's `log show` tree. Each answers the events
or `LogCorruptError`; nothing else escapes, and a log that opens checks clean once repaired
unless its stored part already broke an invariant (docs/pipeline-spec.md §10)."""

from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.cli._log_show import build_tree, render_tree
from codemode.pipeline import LogCorruptError, PendingApproval, events
from codemode.pipeline.log import check, load, open_log
from tests._fuzz import examples

pytestmark = pytest.mark.log_unchecked("mutated on purpose")


def sound_events() -> list[events.Event]:
    """One of each kind of event a Code-Mode run writes, in a sound order."""
    result = events.ToolResult(
        turn=1, step=1, message=events.ToolResultMessage(
            id="m", source=events.MessageSource(kind="tool", call_id="r"),
            content=(events.ToolResultBlock(tool_call_id="r", content=(
                {"type": "text", "text": "ok"},), is_error=False),)))
    return [
        events.TurnStart(turn=1), events.StepStart(turn=1, step=1),
        events.ToolCall(turn=1, step=1, call_id="r", name="run_code", arguments='{"code":""}'),
        events.CodeDispatchStart(root_call_id="r", parent_call_id="r", sub_call_id="r:code:1",
                                 name="add", arguments={"a": [1, {"b": None}]}),
        events.CodeDispatch(root_call_id="r", parent_call_id="r", sub_call_id="r:code:1",
                            name="add", arguments={"a": 1}, is_error=False,
                            content=({"type": "text", "text": "2"},), answer={"ok": True}),
        events.ToolSuspended(run_id="r", call_id="r", name="run_code", arguments={},
                             state={"code": ""}, requests=(PendingApproval(
                                 id="r:2", tool_name="add", arguments={}),)),
        result, events.StepEnd(turn=1, step=1), events.TurnEnd(turn=1),
        events.ToolResumed(run_id="r", call_id="r:resume:1", decisions=()),
        events.TurnStart(turn=2), events.StepStart(turn=2, step=2),
        events.ToolCall(turn=2, step=2, call_id="r:resume:1", name="run_code", arguments="{}"),
    ]


def line_mutation() -> st.SearchStrategy[Any]:
    """A change to one JSON event (as a Python value) or to its text."""
    deep = st.integers(100, 5000).map(lambda n: f"DEEP:{n}")   # nesting n deep
    junk = st.one_of(st.none(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5),
                     st.lists(st.integers(), max_size=2), st.just(2**70), st.just(-1), deep)
    return st.tuples(st.sampled_from(["set", "drop_key", "cut", "bytes"]),
                     st.sampled_from(["seq", "type", "turn", "step", "callId", "subCallId",
                                      "message", "content", "arguments", "runId", "state"]),
                     junk, st.integers(0, 400))


def mutate_line(line: str, mutation: Any) -> str | bytes:
    how, key, value, at = mutation
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):    # mutated before: only its text changes now
        data = None
    if not isinstance(data, dict) and how in ("set", "drop_key"):
        how = "cut"
    if how == "set":
        data[key] = value
    elif how == "drop_key":
        data.pop(key, None)
    elif how == "cut":
        return line[: at % (len(line) + 1)]
    else:
        raw = line.encode()
        cut = at % (len(raw) + 1)
        return raw[:cut] + b"\xff\xfe" + raw[cut:]
    text = json.dumps(data)
    if isinstance(value, str) and value.startswith("DEEP:"):
        depth = int(value[5:])
        text = text.replace(json.dumps(value), "[" * depth + "]" * depth)
    return text


mutations = st.lists(st.tuples(st.integers(0, 20), st.sampled_from(
    ["mutate", "delete", "duplicate", "swap"]), line_mutation()), min_size=1, max_size=3)
_numbers = itertools.count()


def written(tmp_path: Path, suffix: str) -> tuple[Path, list[str]]:
    path = tmp_path / f"s{next(_numbers)}{suffix}"
    with open_log(path) as log:
        for event in sound_events():
            log.append(event)
    return path, [events.encode_event(e).decode() for e in load(path)]


def apply(lines: list[str | bytes], changes: Any) -> list[str | bytes]:
    for index, op, mutation in changes:
        i = index % len(lines)
        if op == "mutate" and isinstance(lines[i], str):
            lines[i] = mutate_line(lines[i], mutation)   # type: ignore[arg-type]
        elif op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = (i + 1) % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
    return lines


def readers_answer_typed(path: Path) -> None:
    """Every reader answers the events or `LogCorruptError`, nothing else."""
    try:
        stored = load(path)
    except LogCorruptError:
        stored = None
    if stored is not None:
        check(stored)
        check(stored, complete=False)
        render_tree(build_tree(stored))
    try:
        log = open_log(path)
    except LogCorruptError:
        return
    with log:
        after = log.read()
    if stored is not None and check(stored, complete=False) == []:
        assert check(after) == [], "a sound partial log checks clean once repaired"


@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(changes=mutations)
def test_a_mutated_jsonl_log_is_read_or_refused_typed(tmp_path: Path, changes: Any) -> None:
    path, lines = written(tmp_path, ".jsonl")
    mutated = apply(list(lines), changes)
    path.write_bytes(b"".join((m if isinstance(m, bytes) else m.encode("utf-8", "replace"))
                              + b"\n" for m in mutated))
    readers_answer_typed(path)


@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(changes=mutations, row_key=st.one_of(st.none(), st.integers(-2, 30)),
       body=st.one_of(st.none(), st.sampled_from([None, 7, 1.5, b"\x00\xff", b"{}", ""])),
       cut=st.one_of(st.none(), st.floats(0.05, 0.95)))
def test_a_mutated_sqlite_log_is_read_or_refused_typed(
        tmp_path: Path, changes: Any, row_key: int | None, body: Any,
        cut: float | None) -> None:
    path, lines = written(tmp_path, ".db")
    mutated = apply(list(lines), changes)
    path.unlink()
    with sqlite3.connect(path) as db:           # the schema without its constraints
        db.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, type TEXT, time REAL, "
                   "body)")
        for number, line in enumerate(mutated, start=1):
            db.execute("INSERT INTO events VALUES (?, 'x', 0, ?)", (number, line))
        if body != "":
            db.execute("UPDATE events SET body = ? WHERE seq = 2", (body,))
        if row_key is not None:
            db.execute("UPDATE OR IGNORE events SET seq = ? WHERE seq = 3", (row_key,))
    if cut is not None:
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * cut)])
    readers_answer_typed(path)
