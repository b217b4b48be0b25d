"""Sub-call batches a program writes by hand through the raw `host.dispatch`, through a real
session: whatever the batch holds, each call gets one typed, recorded outcome, the log keeps
its invariants and the run's scheduler goes on taking calls."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode import CodeMode, Session, events, tool
from codemode.pipeline.log import check
from tests._fuzz import examples

SEND = """\
import json, sys
host = sys.modules["wit_world.imports.host"]
def send(calls):
    batch = {"calls": calls, "cancel": [], "wait_s": None, "until": None}
    return json.loads(host.dispatch(json.dumps(batch)))["results"]
"""


@tool(concurrency_safe=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def session_at(path: Path) -> Session:
    session = Session(tools=[add], log=path)
    CodeMode(session)
    return session


async def test_an_empty_tool_name_is_refused_invalid_args_and_recorded(tmp_path: Path) -> None:
    session = session_at(tmp_path / "s.jsonl")
    code = SEND + ('first = send([{"id": 1, "name": "", "args": {"a": 1}}])\n'
                   'second = send([{"id": 2, "name": "add", "args": {"a": 1, "b": 2}}])\n'
                   "[first, second]")
    result = await session.call("run_code", {"code": code})
    assert not result.is_error, result.text
    assert result.value["result"] == [
        [{"id": 1, "ok": False, "code": "INVALID_ARGS",
          "message": "name must be a non-empty string"}],
        [{"id": 2, "ok": True, "value": 3}]]
    logged = session.log.read()
    settles = [(e.name, e.code) for e in logged if isinstance(e, events.CodeDispatch)]
    assert settles == [("", "INVALID_ARGS"), ("add", msgspec_unset())]
    session.close()
    assert check(logged) == []


def msgspec_unset() -> Any:
    import msgspec

    return msgspec.UNSET


calls = st.lists(st.fixed_dictionaries({
    "id": st.integers(1, 4),
    "name": st.sampled_from(["", "add", "nope", "\x00", "a" * 300, "run_code"]),
    "args": st.one_of(
        st.fixed_dictionaries({"a": st.integers(-5, 5), "b": st.integers(-5, 5)}),
        st.dictionaries(st.sampled_from(["a", "b", "subCallId", "x"]),
                        st.one_of(st.integers(), st.text(max_size=3), st.none()), max_size=3),
        st.integers(), st.none(), st.text(max_size=3))}), max_size=4)


@settings(max_examples=examples(15), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(batches=st.lists(calls, min_size=1, max_size=3))
async def test_any_batches_are_answered_recorded_and_the_run_goes_on(tmp_path: Path,
                                                                    batches: Any) -> None:
    path = tmp_path / f"s{next(_numbers)}.jsonl"
    session = session_at(path)
    code = SEND + "".join(f"send(json.loads({json.dumps(b)!r}))\n" for b in batches) + \
        'got = send([{"id": 99, "name": "add", "args": {"a": 2, "b": 2}}])\n' \
        'while not any(r["id"] == 99 for r in got):\n' \
        '    got = send([])\n' \
        '[r for r in got if r["id"] == 99]'
    try:
        result = await session.call("run_code", {"code": code})
        logged = session.log.read()
    finally:
        session.close()
    assert not result.is_error, result.text
    assert result.value["result"] == [{"id": 99, "ok": True, "value": 4}]
    starts = [e.sub_call_id for e in logged if isinstance(e, events.CodeDispatchStart)]
    settles = [e.sub_call_id for e in logged if isinstance(e, events.CodeDispatch)]
    assert sorted(starts) == sorted(settles)
    assert check(logged) == []


_numbers = itertools.count()
