"""The contract every sandbox tier keeps (`sandbox.Sandbox`): outcomes, limits, the tool
bridge and binding rejections. Each behaviour is written once and runs on both tiers; what
one tier does on its own is in test_wasm_sandbox.py / test_restricted_sandbox.py."""

import json
import random
import time

import pytest
from msgspec import UNSET

from codemode.sandbox import (OutputLimitExceeded, ProgramError, RestrictedSandbox, RunRequest,
                     SandboxLimits, SubcallLimitExceeded, TimeLimitExceeded, WasmSandbox)

from .conftest import EchoHost, echo_tool


def run(sandbox, host, code, tools=(), **limits):
    request = RunRequest(code=code, tools=tuple(tools),
                         limits=SandboxLimits(**{"wall_clock_s": 3.0, **limits}))
    return sandbox.run(request, host)


@pytest.fixture(scope="module", params=["wasm", "restricted"])
def tier(request):
    """Each shared behaviour runs once per tier."""
    return WasmSandbox() if request.param == "wasm" else RestrictedSandbox()


# ---- the shared contract (both tiers) -----------------------------------------------------

def test_final_expression_is_the_value_and_stdout_is_captured(tier, host):
    outcome = run(tier, host, "print('hello')\nx = 20\nx + 22")
    assert (outcome.status, outcome.stdout, outcome.value) == ("ok", "hello\n", 42)


def test_no_final_expression_leaves_value_unset(tier, host):
    assert run(tier, host, "x = 1").value is UNSET
    assert run(tier, host, "for i in range(2):\n    pass").value is UNSET


@pytest.mark.parametrize("code", ["None", "print('x')", "{}.get('missing')"])
def test_a_final_expression_of_none_is_the_value_none(tier, host, code):
    outcome = run(tier, host, code)
    assert outcome.status == "ok" and outcome.value is None


def test_non_json_final_value_arrives_as_repr(tier, host):
    outcome = run(tier, host, "{1, 2}")
    assert (outcome.value, outcome.value_repr) == ("{1, 2}", True)


def test_exception_traceback_shows_only_program_lines(tier, host):
    outcome = run(tier, host, "def f(x):\n    return 1 / x\n\nf(0)")
    assert outcome.status == "error"
    assert isinstance(outcome.error, ProgramError)
    assert (outcome.error.type, outcome.error.message) == ("ZeroDivisionError",
                                                           "division by zero")
    lines = [line for line in outcome.error.traceback.splitlines()
             if set(line.strip()) - set("~^")]     # caret lines differ between versions
    assert lines == [
        "Traceback (most recent call last):",
        '  File "<program>", line 4, in <module>',
        "    f(0)",
        '  File "<program>", line 2, in f',
        "    return 1 / x",
        "ZeroDivisionError: division by zero"]


def test_syntax_error_is_a_program_error(tier, host):
    outcome = run(tier, host, "def f(:\n  pass")
    assert outcome.error.type == "SyntaxError"
    assert 'File "<program>", line 1' in outcome.error.traceback


@pytest.mark.parametrize("code, kind, message", [
    ("raise SystemExit(3)", "SystemExit", "the program called sys.exit(3)"),
    ("raise KeyboardInterrupt", "KeyboardInterrupt", "KeyboardInterrupt"),
    ("def f(): return f()\nf()", "RecursionError", "maximum recursion depth exceeded"),
])
def test_base_exceptions_become_structured_errors(tier, host, code, kind, message):
    outcome = run(tier, host, code)
    assert (outcome.status, outcome.error.type, outcome.error.message) == ("error", kind,
                                                                          message)


def test_infinite_loop_hits_the_wall_clock_limit(tier, host):
    started = time.monotonic()
    outcome = run(tier, host, "while True:\n    pass", wall_clock_s=0.5)
    assert isinstance(outcome.error, TimeLimitExceeded)
    assert outcome.status == "limit"
    assert time.monotonic() - started < 2 * 0.5 + 0.5


def test_sleep_counts_against_the_wall_clock(tier, host):
    started = time.monotonic()
    outcome = run(tier, host, "import time\nwhile True:\n    time.sleep(10)", wall_clock_s=0.5)
    assert isinstance(outcome.error, TimeLimitExceeded)
    assert time.monotonic() - started < 1.5


def test_finally_cannot_extend_the_run(tier, host):
    code = "try:\n    while True: pass\nfinally:\n    while True: pass"
    outcome = run(tier, host, code, wall_clock_s=0.5)
    assert isinstance(outcome.error, TimeLimitExceeded)


def test_output_is_truncated_with_a_marker(tier, host):
    outcome = run(tier, host, "print('x' * 5000)", output_bytes=1000)
    assert isinstance(outcome.error, OutputLimitExceeded)
    assert outcome.stdout == "x" * 1000 + "\n[... stdout truncated at 1000 bytes]\n"


def test_catching_the_output_limit_does_not_undo_it(tier, host):
    code = ("for i in range(10**6):\n    try:\n        print('y' * 100)\n"
            "    except BaseException:\n        pass\n'done'")
    outcome = run(tier, host, code, output_bytes=1000)
    assert isinstance(outcome.error, OutputLimitExceeded)


def test_nothing_leaks_between_runs(tier, host):
    run(tier, host, "import decimal\ndecimal.getcontext().prec = 7\nleaked = 1")
    outcome = run(tier, host, "import decimal\n[decimal.getcontext().prec, 'leaked' in dir()]")
    assert outcome.value == [28, False]


def test_random_state_differs_between_runs(tier, host):
    code = "import random\nrandom.seed(5)\nrandom.random()"
    seeded = run(tier, host, code).value
    first = run(tier, host, "import random\nrandom.random()").value
    second = run(tier, host, "import random\nrandom.random()").value
    assert first != second
    assert seeded == random.Random(5).random()


def test_name_is_main(tier, host):
    assert run(tier, host, "__name__").value == "__main__"


def test_sync_tool_call_returns_the_value(tier, host):
    outcome = run(tier, host, "echo(value=[1, 2])", tools=[echo_tool()])
    assert outcome.value == {"value": [1, 2]}
    assert [c["name"] for c in host.calls] == ["echo"]
    assert outcome.subcalls == 1


def test_positional_arguments_map_to_parameter_names(tier, host):
    assert run(tier, host, "echo(5)", tools=[echo_tool()]).value == {"value": 5}


@pytest.mark.parametrize("code, message", [
    ("echo(1, 2)", "echo() takes 1 positional argument but 2 were given"),
    ("echo(1, value=2)", "echo() got multiple values for argument 'value'"),
    ("need()", "need() missing 1 required argument: 'a'"),
    ("need(a=1, b=2)", "need() got an unexpected keyword argument 'b'"),
])
def test_call_shape_errors_read_like_python_and_reach_the_host(tier, host, code, message):
    # A call of the wrong shape is still a call: sent with `invalid` (the Python-style
    # message) so the host records it, and refused as ToolArgumentError, a TypeError.
    tools = [echo_tool(), echo_tool("need", params=(("a", True),), extra=False)]
    name = code.split("(")[0]
    probe = f"try:\n    {code}\nexcept TypeError as e:\n    r = [type(e).__name__, e.code, e.message]\nr"
    outcome = run(tier, host, probe, tools=tools)
    assert outcome.value == ["ToolArgumentError", "INVALID_ARGS", f"invalid arguments: {message}"]
    [call] = host.calls
    assert (call["name"], call["invalid"]) == (name, message)


@pytest.mark.parametrize("arg, message", [
    ("{1, 2}", "echo(): arguments['value'] is a set, which is not a JSON value "
               "(use dict, list, str, int, float, bool or None)"),
    ("float('nan')", "echo(): arguments['value'] is nan, which is not a JSON value"),
    ("(1, 2)", "echo(): arguments['value'] is a tuple, which is not a JSON value "
               "(use dict, list, str, int, float, bool or None)"),
    ("{1: 'a'}", "echo(): arguments['value'] has a key 1 of type int; JSON object keys "
                 "must be str"),
    ("b'x'", "echo(): arguments['value'] is a bytes, which is not a JSON value "
             "(use dict, list, str, int, float, bool or None)"),
    ("object()", "echo(): arguments['value'] is a object, which is not a JSON value "
                 "(use dict, list, str, int, float, bool or None)"),
    ("-0.0", "echo(): arguments['value'] is -0.0, which JSON does not keep apart from 0"),
    ("2**63", "echo(): arguments['value'] is an int outside the 64-bit range JSON tools "
              "accept"),
    ("'\\ud800'", "echo(): arguments['value'] contains an unpaired surrogate, which is not "
                   "valid Unicode text"),
])
def test_non_json_arguments_fail_before_dispatch(tier, host, arg, message):
    outcome = run(tier, host, f"echo(value={arg})", tools=[echo_tool()])
    assert (outcome.error.type, outcome.error.message) == ("TypeError", message)
    assert host.calls == []


def test_cyclic_arguments_fail_before_dispatch(tier, host):
    outcome = run(tier, host, "a = []\na.append(a)\necho(value=a)", tools=[echo_tool()])
    assert outcome.error.type == "TypeError"
    assert outcome.error.message == ("echo(): arguments['value'][0] contains itself (a cycle), "
                                     "which JSON cannot express")
    assert host.calls == []


def test_rejection_raises_the_typed_binding_error(tier):
    host = EchoHost(fail={"secret"})
    code = ("try:\n    secret()\nexcept ToolDenied as e:\n"
            "    r = [type(e).__name__, e.tool_name, e.code, e.message,"
            " isinstance(e, ToolCallError)]\nr")
    outcome = run(tier, host, code, tools=[echo_tool("secret", params=())])
    assert outcome.value == ["ToolDenied", "secret", "DENIED", "secret is not allowed", True]


def test_call_tool_reaches_any_name_and_the_host_decides(tier, host):
    outcome = run(tier, host, "call_tool('whatever', x=1)")
    assert outcome.value == {"x": 1}
    assert host.calls[0]["name"] == "whatever"


def test_tools_namespace(tier, host):
    assert run(tier, host, "tools.echo(value=3)", tools=[echo_tool()]).value == {"value": 3}


def test_gathered_calls_go_out_as_one_batch(tier, host):
    code = ("import asyncio\nasync def main():\n"
            "    return await asyncio.gather(*(echo(value=i) for i in range(5)))\n"
            "asyncio.run(main())")
    outcome = run(tier, host, code, tools=[echo_tool()])
    assert outcome.value == [{"value": i} for i in range(5)]
    assert [len(b["calls"]) for b in host.batches] == [5]


def test_task_group_and_timers(tier, host):
    code = ("import asyncio\nasync def one(i):\n    await asyncio.sleep(0.01 * i)\n"
            "    return await echo(value=i)\n"
            "async def main():\n    async with asyncio.TaskGroup() as tg:\n"
            "        tasks = [tg.create_task(one(i)) for i in range(3)]\n"
            "    return [t.result()['value'] for t in tasks]\nawait main()")
    assert run(tier, host, code, tools=[echo_tool()]).value == [0, 1, 2]


def test_top_level_await(tier, host):
    assert run(tier, host, "await echo(value='hi')", tools=[echo_tool()]).value == \
        {"value": "hi"}


def test_a_plain_call_in_async_code_returns_the_value(tier, host):
    code = ("async def tool(name, **kwargs):\n    return call_tool(name, **kwargs)\n"
            "async def main():\n    r = echo(value=1)\n    s = await tool('echo', value=2)\n"
            "    return [r['value'], s['value']]\nawait main()")
    assert run(tier, host, code, tools=[echo_tool()]).value == [1, 2]


def test_subcall_budget_cannot_be_caught_and_ignored(tier, host):
    code = ("n = 0\nwhile True:\n    try:\n        echo(value=n)\n"
            "    except BaseException:\n        n += 1")
    outcome = run(tier, host, code, tools=[echo_tool()], max_subcalls=5)
    assert isinstance(outcome.error, SubcallLimitExceeded)
    assert len(host.calls) == 5


def test_slow_host_call_cannot_hold_the_run_past_its_deadline(tier):
    def slow(batch):
        request = json.loads(batch)
        time.sleep(min(request["wait_s"] or 0, 5))   # honours the bounded wait
        return json.dumps({"results": []})

    started = time.monotonic()
    outcome = run(tier, slow, "echo(value=1)", tools=[echo_tool()], wall_clock_s=0.5)
    assert isinstance(outcome.error, TimeLimitExceeded)
    assert time.monotonic() - started < 1.5


def test_arguments_over_the_request_limit_are_refused_in_the_program(tier, host):
    outcome = run(tier, host, "echo(value='x' * 2000)", tools=[echo_tool()],
                  request_bytes=1000)
    assert outcome.error.type == "ValueError"
    assert outcome.error.message == ("arguments of echo(...) are 2012 bytes of JSON, over the "
                                     "sandbox's limit of 1000 bytes per sub-call")
    assert host.calls == []


@pytest.mark.parametrize("code, message", [
    ("import socket", "module 'socket' is not available in the sandbox"),
    ("import subprocess", "module 'subprocess' is not available in the sandbox"),
    ("from asyncio import subprocess", "module 'asyncio.subprocess' is not available"),
])
def test_unavailable_imports_raise_module_not_found(tier, host, code, message):
    outcome = run(tier, host, code)
    assert outcome.error.type == "ModuleNotFoundError"
    assert outcome.error.message.startswith(message)


def test_curated_stdlib_is_importable(tier, host):
    code = ("import json, re, math, statistics, decimal, fractions, datetime, collections, "
            "itertools, functools, operator, heapq, bisect, string, textwrap, difflib, random, "
            "hashlib, base64, csv, io, dataclasses, typing, enum, copy, pprint, urllib.parse, "
            "html, unicodedata, calendar, time, asyncio\n"
            "datetime.datetime.strptime('2024-02-03', '%Y-%m-%d').day + statistics.mean([1, 3])")
    outcome = run(tier, host, code)
    assert outcome.status == "ok", outcome.error
    assert outcome.value == 5
