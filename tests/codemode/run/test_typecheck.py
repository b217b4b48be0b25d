"""The type check before the run (docs/codemode.md "Type check before the run"): ty against
the stubs the model reads; "enforce" refuses before any tool runs, "warn" runs and reports."""

import textwrap
from typing import Literal

import pytest

from codemode import CodeMode, Policy, Session, events, tool
from codemode._run import typecheck
from codemode._run.typecheck import TypeCheckFailed


@tool(concurrency_safe=True)
def get_weather(city: str, days: int = 1) -> dict:
    """Weather of a city for the next `days` days."""
    return {"city": city, "temp": 21.5, "days": days}


@tool(concurrency_safe=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def make(tmp_path, **options):
    session = Session(tools=[get_weather, add], log=str(tmp_path / "session.jsonl"))
    mode = CodeMode(session, **options)
    return session, mode


def of(session, kind):
    return [e for e in session.log.read() if isinstance(e, kind)]


def sub_calls(session):
    """The tool calls programs made (each sub-call's dispatch start)."""
    return of(session, events.CodeDispatchStart)


REFUSED = [
    ("wrong type", 'print("first")\nget_weather(42)\n', 2, 13, "invalid-argument-type"),
    ("unknown keyword", 'add(1, 2)\nget_weather("Paris", day=2)\n', 2, 22, "unknown-argument"),
    ("unknown tool", 'add(1, 2)\nx = get_wether("Paris")\n', 2, 5, "unresolved-reference"),
    ("missing argument", "add(a=1)\n", 1, 1, "missing-argument"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("code", "line", "column", "rule"), [c[1:] for c in REFUSED],
                         ids=[c[0] for c in REFUSED])
async def test_enforce_refuses_before_any_tool_runs(tmp_path, code, line, column, rule):
    session, mode = make(tmp_path)
    assert mode.type_check == "enforce"                  # the default
    result = await session.call("run_code", {"code": code}, call_id="r1")
    assert result.is_error
    assert (result.error.info.code, result.error.info.name) == ("CODE_RUN_FAILED",
                                                                 "TypeCheckFailed")
    first = result.error.message.splitlines()[0]
    assert first.startswith("code run failed (type-check): 1 type error (<program>, "
                            f"line {line}, column {column}: ")
    assert f'  File "<program>", line {line}, column {column}\n' in result.error.message
    assert f"[{rule}]" in result.error.message
    assert sub_calls(session) == []                      # no tool ran
    [error] = mode.type_errors("r1")
    assert (error.line, error.column, error.rule) == (line, column, rule)
    session.close()


@pytest.mark.slow
async def test_enforce_lists_every_error_with_line_and_column(tmp_path):
    session, mode = make(tmp_path)
    code = 'get_weather(42)\nadd(1, "2")\nnope()\n'
    result = await session.call("run_code", {"code": code}, call_id="r1")
    assert result.error.message.startswith("code run failed (type-check): 3 type errors ")
    assert [(e.line, e.column) for e in mode.type_errors("r1")] == [(1, 13), (2, 8), (3, 1)]
    assert "    add(1, \"2\")\n           ^^^\n" in result.error.message
    session.close()


CORRECT = textwrap.dedent('''\
    import asyncio
    import functools
    import json
    import operator

    def later():
        return set_later + missing_tool()         # a body runs only when called

    def celsius(report):
        return report["temp"]

    async def both(a, b):
        return await asyncio.gather(get_weather(a), get_weather(city=b, days=2))

    first, second = await both("Paris", "Oslo")
    totals = await asyncio.gather(*[add(i, i) for i in range(3)])
    task = asyncio.create_task(add(a=1, b=2))
    done = await asyncio.wait_for(add(2, 2), 30)
    direct = call_tool("add", a=5, b=6)
    data = json.loads('{"n": 3}')
    mixed = [1.5, "Lyon"]
    by_route = tools.add(a=data["n"], b=1)
    try:
        shown = get_weather(mixed[1])["city"]
    except ToolCallError as exc:
        shown = exc.message
    set_later = functools.reduce(operator.mul, [1, 2, 3])
    [celsius(first), second["days"], totals, await task, done, direct, by_route, shown,
     set_later]
    ''')


@pytest.mark.slow
async def test_a_correct_program_with_gather_helpers_and_call_tool_passes(tmp_path):
    session, mode = make(tmp_path)
    result = await session.call("run_code", {"code": CORRECT}, call_id="r1")
    assert not result.is_error, result.text
    assert result.value["result"] == [21.5, 2, [0, 2, 4], 3, 4, 11, 4, "Lyon", 6]
    assert "type_errors" not in result.value and mode.type_errors("r1") == []
    session.close()


@tool
def convert(celsius: float, unit: Literal["c", "f"]) -> float:
    """A temperature in the unit asked."""
    return celsius if unit == "c" else celsius * 9 / 5 + 32


@pytest.mark.slow
async def test_an_argument_known_only_as_a_union_of_literals_is_left_to_the_run(tmp_path):
    # the loop variable is Literal["c", "k"]: right on its first turn, wrong on its second
    session = Session(tools=[convert], log=str(tmp_path / "session.jsonl"))
    CodeMode(session, output_paging=True)
    code = ("found = []\nfor unit in ('c', 'k'):\n    try:\n"
            "        found.append(convert(20.0, unit))\n    except ToolCallError as exc:\n"
            "        found.append(exc.code)\n"
            "for part in ('stdout', 'bogus'):\n    try:\n        read_output('nope', part)\n"
            "    except ToolCallError as exc:\n        found.append(exc.code)\nfound")
    result = await session.call("run_code", {"code": code})
    assert not result.is_error, result.text
    assert result.value["result"][:2] == [20.0, "INVALID_ARGS"]
    assert len(result.value["result"]) == 4
    refused = await session.call("run_code", {"code": "convert(20.0, 'k')"})
    assert refused.is_error and "type-check" in refused.text
    session.close()


HANDLED = '''\
try:
    add(a="one", b=2)
except ToolArgumentError as exc:
    first = exc.code
try:
    get_weather(city=3)
except (KeyError, errors.ToolCallError):
    second = "refused"
try:
    later_tool()
except NameError:
    third = "no such tool"
try:
    add(1)
except:
    fourth = "anything"
[first, second, third, fourth]
'''


@pytest.mark.slow
async def test_a_failure_the_program_catches_is_not_reported(tmp_path):
    session, mode = make(tmp_path)
    code = "import types\nerrors = types.SimpleNamespace(ToolCallError=ToolCallError)\n" + HANDLED
    result = await session.call("run_code", {"code": code}, call_id="r1")
    assert not result.is_error, result.text
    assert result.value["result"] == ["INVALID_ARGS", "refused", "no such tool", "anything"]
    assert mode.type_errors("r1") == []
    # a handler that does not catch what the wrong call raises leaves it reported
    uncaught = "try:\n    add(a='one', b=2)\nexcept KeyError:\n    pass\n"
    refused = await session.call("run_code", {"code": uncaught}, call_id="r2")
    assert refused.is_error and [(e.line, e.rule) for e in mode.type_errors("r2")] == [
        (2, "invalid-argument-type")]
    session.close()


@pytest.mark.slow
@pytest.mark.parametrize("code", [
    "exec('total = 1')\ntotal",
    "globals()['total'] = 2\ntotal",
    "vars()['total'] = 3\ntotal",
])
async def test_a_name_the_program_defines_at_run_time_is_not_reported(tmp_path, code):
    session, mode = make(tmp_path)
    result = await session.call("run_code", {"code": code}, call_id="r1")
    assert not result.is_error, result.text
    assert mode.type_errors("r1") == []
    session.close()


@pytest.mark.slow
async def test_discovery_functions_pass_the_check(tmp_path):
    session, mode = make(tmp_path)
    code = ('try:\n    found = search_tools("weather", limit=3)\n    shown = describe("add")\n'
            "except NameError:\n    found = shown = None\nadd(1, 1)\n")
    result = await session.call("run_code", {"code": code}, call_id="r1")
    assert not result.is_error, result.text
    assert mode.type_errors("r1") == []
    session.close()


@pytest.mark.slow
async def test_warn_runs_and_reports_the_errors_beside_the_result(tmp_path):
    session, mode = make(tmp_path, type_check="warn")
    code = "import random\nif random.random() > 2:\n    nope()\nadd(1, 2)"   # runs, and well
    result = await session.call("run_code", {"code": code}, call_id="r1")
    assert not result.is_error, result.text
    assert result.value["result"] == 3
    [error] = result.value["type_errors"]
    assert (error["line"], error["column"], error["rule"]) == (3, 5, "unresolved-reference")
    assert len(sub_calls(session)) == 1                  # it ran anyway
    assert "The type check found 1 type error (<program>, line 3, column 5" in result.text
    assert [e.line for e in mode.type_errors("r1")] == [3]
    session.close()


@pytest.mark.slow
async def test_warn_adds_the_errors_to_a_failed_run(tmp_path):
    session, _ = make(tmp_path, type_check="warn")
    result = await session.call("run_code", {"code": "add(1, 'x')"})
    assert result.is_error and result.error.info.code == "CODE_RUN_FAILED"
    assert result.error.message.startswith("code run failed (exception): ")
    assert "The type check found 1 type error (<program>, line 1, column 8" in result.error.message
    assert len(of(session, events.CodeDispatch)) == 1    # the call was made, and refused
    session.close()


@pytest.mark.slow
async def test_off_runs_unchecked(tmp_path):
    session, mode = make(tmp_path, type_check="off")
    result = await session.call("run_code", {"code": "get_weather(42)"}, call_id="r1")
    assert result.is_error and "(type-check)" not in result.error.message
    assert len(of(session, events.CodeDispatch)) == 1 and mode.type_errors("r1") == []
    session.close()


@pytest.mark.slow
async def test_a_syntax_error_is_still_the_sandbox_s(tmp_path):
    session, _ = make(tmp_path)
    result = await session.call("run_code", {"code": "def f(:\n    pass"})
    assert result.error.message.startswith("code run failed (exception): invalid syntax")
    session.close()


@pytest.mark.slow
async def test_a_program_naming_no_tool_is_left_to_the_run(tmp_path, monkeypatch):
    """Nothing it does can be refused before a tool runs: it calls none by name. Its error
    is the run's, as without a check; ty is not started for it."""
    session, mode = make(tmp_path)
    started = []
    monkeypatch.setattr(typecheck, "_run_ty", lambda *a: started.append(a))
    result = await session.call("run_code", {"code": "x = 1\ny = x + nope\n"},
                                call_id="r1")
    assert result.is_error and "(type-check)" not in result.error.message
    assert result.error.message.startswith("code run failed (exception): ")
    assert "NameError" in result.error.message and mode.type_errors("r1") == []
    assert started == []
    session.close()


@pytest.mark.slow
@pytest.mark.parametrize("code", [
    "y = 1 + nope\nadd(1, 2)\n",                         # a tool by its name
    "y = 1 + nope\ncall_tool('add', a=1, b=2)\n",        # through call_tool
    "y = 1 + nope\ntools.add(a=1, b=2)\n",               # through the tools namespace
    "y = 1 + nope\nsearch_tools('add')\n",               # discovery
])
async def test_a_program_naming_a_tool_is_still_refused_before_it_runs(tmp_path, code):
    session, mode = make(tmp_path)
    result = await session.call("run_code", {"code": code}, call_id="r1")
    assert result.is_error and "(type-check)" in result.error.message, result.text
    assert [e.rule for e in mode.type_errors("r1")] == ["unresolved-reference"]
    assert sub_calls(session) == []
    session.close()


@pytest.mark.slow
async def test_the_check_follows_the_tools_the_run_may_call(tmp_path):
    session = Session(tools=[get_weather, add], log=str(tmp_path / "session.jsonl"))
    CodeMode(session, expose=["add"])
    result = await session.call("run_code", {"code": "add(1, 2)\nget_weather('Paris')"})
    assert "Name `get_weather` used when not defined" in result.error.message
    assert sub_calls(session) == []
    session.close()


def test_a_bad_setting_is_refused(tmp_path):
    with pytest.raises(ValueError, match="type_check must be one of off, warn, enforce"):
        make(tmp_path, type_check="strict")


def test_the_policy_sets_the_check(tmp_path):
    policy = Policy.from_data({"type_check": "warn"})
    session = Session(tools=[add])
    assert policy.apply(session).type_check == "warn"
    assert Policy().type_check == "enforce"
    with pytest.raises(Exception, match="type_check"):
        Policy.from_data({"type_check": "strict"})


def test_type_check_failed_is_shaped_as_a_code_run_failure():
    failed = TypeCheckFailed("code run failed (type-check): x", ())
    assert failed.code == "CODE_RUN_FAILED" and failed.outcome is None


@pytest.mark.slow
async def test_concurrent_checks_naming_many_different_tools_each_get_their_own_stubs(tmp_path):
    """More sets of named tools than the checker keeps, checked at once: each check keeps
    its stubs until it ends."""
    import asyncio

    from codemode import ToolDefinition

    def echo_tool(i):
        return ToolDefinition(
            name=f"echo_{i}", description="Echo.", execute=lambda args, ctx: args["n"],
            parameters={"type": "object", "properties": {"n": {"type": "integer"}},
                        "required": ["n"]})

    session = Session(tools=[echo_tool(i) for i in range(48)],
                      log=str(tmp_path / "session.jsonl"))
    mode = CodeMode(session)
    results = await asyncio.gather(*(
        session.call("run_code", {"code": f'echo_{i}(n="{i}")'}, call_id=f"r{i}")
        for i in range(48)))
    for i, result in enumerate(results):
        assert result.is_error and f"function `echo_{i}` is incorrect" in result.error.message
        [error] = mode.type_errors(f"r{i}")
        assert (error.line, error.column) == (1, 7 + len(str(i)))
    assert sub_calls(session) == []
    session.close()


@pytest.mark.slow
def test_a_code_mode_nobody_closed_leaves_no_stubs_directory():
    import subprocess
    import sys
    from pathlib import Path
    probe = ("import asyncio\nfrom codemode import CodeMode, Session\n"
             "from codemode.fixtures.toolset import builtin_tools\n"
             "s = Session(tools=builtin_tools(), log=None)\nmode = CodeMode(s)\n"
             "r = asyncio.run(s.call('run_code', {'code': 'add(a=1, b=2)'}))\n"
             "assert r.value['result'] == 3, r\nprint(mode._checker._root)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    root = Path(out.strip())
    assert root.name.startswith("codemode-typecheck-") and not root.exists()
