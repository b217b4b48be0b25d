"""WasmSandbox against the real component: outcomes, limits, isolation, the tool bridge."""

import json
import time

import pytest
from msgspec import UNSET

from sandbox import (GuestCrashed, MemoryLimitExceeded, OutputLimitExceeded, ProgramError,
                     RunRequest, SandboxLimits, SubcallLimitExceeded, TimeLimitExceeded)

from .conftest import EchoHost, echo_tool


def run(sandbox, host, code, tools=(), **limits):
    return sandbox.run(RunRequest(code=code, tools=tuple(tools),
                                  limits=SandboxLimits(**{"wall_clock_s": 3.0, **limits})),
                       host)


def test_final_expression_is_the_value_and_stdout_is_captured(sandbox, host):
    outcome = run(sandbox, host, "print('hello')\nx = 20\nx + 22")
    assert outcome.status == "ok"
    assert outcome.stdout == "hello\n"
    assert outcome.value == 42


def test_no_final_expression_leaves_value_unset(sandbox, host):
    assert run(sandbox, host, "x = 1").value is UNSET
    assert run(sandbox, host, "print('x')").value is UNSET   # print() returns None


def test_non_json_final_value_arrives_as_repr(sandbox, host):
    outcome = run(sandbox, host, "{1, 2}")
    assert (outcome.value, outcome.value_repr) == ("{1, 2}", True)


def test_exception_traceback_shows_only_program_lines(sandbox, host):
    outcome = run(sandbox, host, "def f(x):\n    return 1 / x\n\nf(0)")
    assert outcome.status == "error"
    assert isinstance(outcome.error, ProgramError)
    assert outcome.error.type == "ZeroDivisionError"
    assert outcome.error.message == "division by zero"
    tb = outcome.error.traceback
    assert 'File "<program>", line 4, in <module>' in tb
    assert 'File "<program>", line 2, in f' in tb
    assert "cm_guest" not in tb and "runtime" not in tb


def test_syntax_error_is_a_program_error(sandbox, host):
    outcome = run(sandbox, host, "def f(:\n  pass")
    assert outcome.error.type == "SyntaxError"
    assert "line 1" in outcome.error.traceback


@pytest.mark.parametrize("code, kind", [
    ("import sys\nsys.exit(3)", "SystemExit"),
    ("raise KeyboardInterrupt", "KeyboardInterrupt"),
    ("def f(): return f()\nf()", "RecursionError"),
])
def test_base_exceptions_become_structured_errors(sandbox, host, code, kind):
    outcome = run(sandbox, host, code)
    assert outcome.status == "error"
    assert outcome.error.type == kind


def test_os_exit_ends_the_program_like_sys_exit(sandbox, host):
    outcome = run(sandbox, host, "import os\nos._exit(4)")
    assert (outcome.error.type, outcome.error.message) == ("SystemExit",
                                                           "the program called sys.exit(4)")


def test_sys_exit_message_names_the_code(sandbox, host):
    outcome = run(sandbox, host, "import sys\nsys.exit(3)")
    assert outcome.error.message == "the program called sys.exit(3)"


def test_infinite_loop_hits_the_wall_clock_limit(sandbox, host):
    started = time.monotonic()
    outcome = run(sandbox, host, "while True:\n    pass", wall_clock_s=0.5)
    assert isinstance(outcome.error, TimeLimitExceeded)
    assert outcome.status == "limit"
    assert time.monotonic() - started < 2 * 0.5 + 0.5


def test_sleep_counts_against_the_wall_clock(sandbox, host):
    started = time.monotonic()
    outcome = run(sandbox, host, "import time\nwhile True:\n    time.sleep(10)",
                  wall_clock_s=0.5)
    assert isinstance(outcome.error, TimeLimitExceeded)
    assert time.monotonic() - started < 1.5


def test_finally_cannot_extend_the_run(sandbox, host):
    code = "try:\n    while True: pass\nfinally:\n    while True: pass"
    outcome = run(sandbox, host, code, wall_clock_s=0.5)
    assert isinstance(outcome.error, TimeLimitExceeded)


def test_memory_bomb_is_a_memory_limit(sandbox, host):
    outcome = run(sandbox, host, "s = 'x' * 10**6\nwhile True:\n    s = s + s",
                  memory_bytes=64 << 20)
    assert isinstance(outcome.error, MemoryLimitExceeded)


def test_fuel_exhaustion_is_typed(sandbox, host):
    from sandbox import FuelExhausted
    outcome = run(sandbox, host, "while True:\n    pass", fuel=50_000_000)
    assert isinstance(outcome.error, FuelExhausted)
    assert outcome.fuel_used == 50_000_000


def test_output_is_truncated_with_a_marker(sandbox, host):
    outcome = run(sandbox, host, "print('x' * 5000)", output_bytes=1000)
    assert isinstance(outcome.error, OutputLimitExceeded)
    assert outcome.stdout.startswith("x" * 1000)
    assert outcome.stdout.endswith("[... stdout truncated at 1000 bytes]\n")


def test_catching_the_output_limit_does_not_undo_it(sandbox, host):
    code = ("for i in range(10**6):\n    try:\n        print('y' * 100)\n"
            "    except BaseException:\n        pass\n'done'")
    outcome = run(sandbox, host, code, output_bytes=1000)
    assert isinstance(outcome.error, OutputLimitExceeded)


def test_deep_native_recursion_ends_the_run_without_harming_the_host(sandbox, host):
    outcome = run(sandbox, host, "l = []\nfor i in range(100000):\n    l = [l]\nrepr(l)")
    assert outcome.status in ("error", "limit")
    assert isinstance(outcome.error, (GuestCrashed, ProgramError))
    assert run(sandbox, host, "1 + 1").value == 2          # the next run is unaffected


@pytest.mark.parametrize("code, message", [
    ("import socket", "module 'socket' is not available in the sandbox"),
    ("import subprocess", "module 'subprocess' is not available in the sandbox"),
    ("from asyncio import subprocess", "module 'asyncio.subprocess' is not available"),
])
def test_unavailable_imports_raise_module_not_found(sandbox, host, code, message):
    outcome = run(sandbox, host, code)
    assert outcome.error.type == "ModuleNotFoundError"
    assert outcome.error.message.startswith(message)


def test_curated_stdlib_is_importable(sandbox, host):
    code = ("import json, re, math, statistics, decimal, fractions, datetime, collections, "
            "itertools, functools, operator, heapq, bisect, string, textwrap, difflib, random, "
            "hashlib, base64, csv, io, dataclasses, typing, enum, copy, pprint, urllib.parse, "
            "html, unicodedata, calendar, time, asyncio\n"
            "datetime.datetime.strptime('2024-02-03', '%Y-%m-%d').day + statistics.mean([1, 3])")
    outcome = run(sandbox, host, code)
    assert outcome.status == "ok", outcome.error
    assert outcome.value == 5


def test_os_process_functions_fail_inside(sandbox, host):
    outcome = run(sandbox, host, "import os\nos.system('touch /tmp/x')")
    assert outcome.status == "error"
    assert outcome.error.type == "AttributeError"


def test_environment_and_filesystem_are_empty(sandbox, host):
    outcome = run(sandbox, host, "import os\n[dict(os.environ), os.listdir('/') if hasattr(os, 'listdir') else []]")
    assert outcome.status in ("ok", "error")
    if outcome.status == "ok":
        assert outcome.value[0] == {}
    outcome = run(sandbox, host, "open('/etc/passwd').read()")
    assert outcome.status == "error"


def test_nothing_leaks_between_runs(sandbox, host):
    run(sandbox, host, "import decimal, json\ndecimal.getcontext().prec = 7\nleaked = 1")
    outcome = run(sandbox, host, "import decimal\n[decimal.getcontext().prec, 'leaked' in dir()]")
    assert outcome.value == [28, False]


def test_random_state_differs_between_runs(sandbox, host):
    first = run(sandbox, host, "import random\nrandom.random()").value
    second = run(sandbox, host, "import random\nrandom.random()").value
    assert first != second


def test_unpaired_surrogates_in_values_and_messages_do_not_crash_the_instance(sandbox, host):
    assert run(sandbox, host, "'a\\udfff'").value == "a\ufffd"
    outcome = run(sandbox, host, "raise ValueError('\\ud800')")
    assert outcome.error.message == "\ufffd"


def test_streams_are_real_text_streams(sandbox, host):
    outcome = run(sandbox, host, "import sys, io\nsys.stdout.write('a')\n"
                                 "isinstance(sys.stdout, io.TextIOWrapper)")
    assert (outcome.stdout, outcome.value) == ("a", True)


def test_name_is_main(sandbox, host):
    assert run(sandbox, host, "__name__").value == "__main__"


# ---- the tool bridge ------------------------------------------------------------------

def test_sync_tool_call_returns_the_value(sandbox, host):
    outcome = run(sandbox, host, "echo(value=[1, 2])", tools=[echo_tool()])
    assert outcome.value == {"value": [1, 2]}
    assert [c["name"] for c in host.calls] == ["echo"]


def test_positional_arguments_map_to_parameter_names(sandbox, host):
    outcome = run(sandbox, host, "echo(5)", tools=[echo_tool()])
    assert outcome.value == {"value": 5}


@pytest.mark.parametrize("code, message", [
    ("echo(1, 2)", "echo() takes 1 positional argument but 2 were given"),
    ("echo(1, value=2)", "echo() got multiple values for argument 'value'"),
    ("need()", "need() missing 1 required argument: 'a'"),
    ("need(a=1, b=2)", "need() got an unexpected keyword argument 'b'"),
])
def test_call_shape_errors_read_like_python(sandbox, host, code, message):
    tools = [echo_tool(), echo_tool("need", params=(("a", True),), extra=False)]
    outcome = run(sandbox, host, code, tools=tools)
    assert outcome.error.type == "TypeError"
    assert outcome.error.message == message
    assert host.calls == []


@pytest.mark.parametrize("arg", ["{1, 2}", "b'x'", "float('nan')", "object()", "(1, 2)",
                                 "{1: 'a'}", "-0.0", "2**63", "'\\ud800'"])
def test_non_json_arguments_fail_before_dispatch(sandbox, host, arg):
    outcome = run(sandbox, host, f"echo(value={arg})", tools=[echo_tool()])
    assert outcome.error.type == "TypeError"
    assert "JSON" in outcome.error.message or "Unicode" in outcome.error.message
    assert host.calls == []


def test_cyclic_arguments_fail_before_dispatch(sandbox, host):
    outcome = run(sandbox, host, "a = []\na.append(a)\necho(value=a)", tools=[echo_tool()])
    assert outcome.error.type == "TypeError"
    assert "cycle" in outcome.error.message
    assert host.calls == []


def test_rejection_raises_the_typed_binding_error(sandbox):
    host = EchoHost(fail={"secret"})
    code = ("try:\n    secret()\nexcept ToolDenied as e:\n"
            "    r = [type(e).__name__, e.tool_name, e.code, e.message, isinstance(e, ToolCallError)]\nr")
    outcome = run(sandbox, host, code, tools=[echo_tool("secret", params=())])
    assert outcome.value == ["ToolDenied", "secret", "DENIED", "secret is not allowed", True]


def test_call_tool_reaches_any_name_and_the_host_decides(sandbox, host):
    outcome = run(sandbox, host, "call_tool('whatever', x=1)")
    assert outcome.value == {"x": 1}
    assert host.calls[0]["name"] == "whatever"


def test_tools_namespace(sandbox, host):
    outcome = run(sandbox, host, "tools.echo(value=3)", tools=[echo_tool()])
    assert outcome.value == {"value": 3}


def test_gathered_calls_go_out_as_one_batch(sandbox, host):
    code = ("import asyncio\nasync def main():\n"
            "    return await asyncio.gather(*(echo(value=i) for i in range(5)))\n"
            "asyncio.run(main())")
    outcome = run(sandbox, host, code, tools=[echo_tool()])
    assert outcome.value == [{"value": i} for i in range(5)]
    assert [len(b["calls"]) for b in host.batches] == [5]


def test_top_level_await(sandbox, host):
    outcome = run(sandbox, host, "await echo(value='hi')", tools=[echo_tool()])
    assert outcome.value == {"value": "hi"}


def test_a_plain_call_in_async_code_returns_the_value(sandbox, host):
    code = ("async def tool(name, **kwargs):\n    return call_tool(name, **kwargs)\n"
            "async def main():\n    r = echo(value=1)\n    s = await tool('echo', value=2)\n"
            "    return [r['value'], s['value']]\nawait main()")
    outcome = run(sandbox, host, code, tools=[echo_tool()])
    assert outcome.value == [1, 2]


@pytest.mark.parametrize("code", [
    "await asyncio.gather(echo(value=0), echo(value=1), echo(value=2))",
    "await asyncio.gather(*(echo(value=i) for i in range(3)))",
    "tasks = [echo(value=i) for i in range(3)]\nawait asyncio.gather(*tasks)",
    "tasks = []\nfor i in range(3):\n    tasks.append(echo(value=i))\nawait asyncio.gather(*tasks)",
    "ts = [asyncio.create_task(echo(value=i)) for i in range(3)]\n[await t for t in ts]",
    "async def main():\n    async with asyncio.TaskGroup() as tg:\n"
    "        ts = [tg.create_task(echo(value=i)) for i in range(3)]\n"
    "    return [t.result() for t in ts]\nasyncio.run(main())",
])
def test_calls_handed_to_asyncio_go_out_as_one_batch(sandbox, host, code):
    outcome = run(sandbox, host, "import asyncio\n" + code, tools=[echo_tool()])
    assert outcome.status == "ok", outcome.error
    assert outcome.value == [{"value": i} for i in range(3)]
    assert [len(b["calls"]) for b in host.batches] == [3]


def test_values_feeding_asyncio_stay_values(sandbox, host):
    # `ids` is iterated inside gather's arguments, `echo(value=...)` inside `len(...)`: both
    # are plain values; only the calls handed to gather are awaitables.
    code = ("import asyncio\nids = echo(value=[1, 2])['value']\n"
            "r = await asyncio.gather(*(echo(value=i) for i in ids))\n"
            "n = len(echo(value='abc')['value'])\n[r, n]")
    outcome = run(sandbox, host, code, tools=[echo_tool()])
    assert outcome.value == [[{"value": 1}, {"value": 2}], 3]


def test_subcall_budget_ends_the_run(sandbox, host):
    code = "for i in range(100):\n    try:\n        echo(value=i)\n    except BaseException:\n        pass"
    outcome = run(sandbox, host, code, tools=[echo_tool()], max_subcalls=10)
    assert isinstance(outcome.error, SubcallLimitExceeded)
    assert len(host.calls) == 10


def test_slow_host_call_cannot_hold_the_run_past_its_deadline(sandbox):
    host = EchoHost(slow_s=0.0)

    def slow(batch):
        request = json.loads(batch)
        time.sleep(min(request["wait_s"] or 0, 5))   # honours the bounded wait
        return json.dumps({"results": []})

    started = time.monotonic()
    outcome = run(sandbox, slow, "echo(value=1)", tools=[echo_tool()], wall_clock_s=0.5)
    assert isinstance(outcome.error, TimeLimitExceeded)
    assert time.monotonic() - started < 1.5


def test_deeply_nested_arguments_are_refused_before_encoding(sandbox, host):
    code = "v = []\nfor _ in range(50_000):\n    v = [v]\necho(value=v)"
    outcome = run(sandbox, host, code, tools=[echo_tool()])
    assert outcome.error.type == "TypeError"
    assert "nested more than 500 levels deep" in outcome.error.message
    assert host.calls == []


def test_subcall_budget_cannot_be_caught_and_ignored(sandbox, host):
    code = ("n = 0\nwhile True:\n    try:\n        echo(value=n)\n"
            "    except BaseException:\n        n += 1")
    outcome = run(sandbox, host, code, tools=[echo_tool()], max_subcalls=5)
    assert isinstance(outcome.error, SubcallLimitExceeded)
    assert len(host.calls) == 5


def test_arguments_over_the_request_limit_are_refused_in_the_guest(sandbox, host):
    outcome = run(sandbox, host, "echo(value='x' * 2000)", tools=[echo_tool()],
                  request_bytes=1000)
    assert outcome.error.type == "ValueError"
    assert host.calls == []
