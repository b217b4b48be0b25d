"""The contract every sandbox tier keeps (`sandbox.Sandbox`): outcomes, limits, the tool
bridge and binding rejections. Each behaviour is written once and runs on both tiers; what
one tier does on its own is in test_wasm_sandbox.py / test_restricted_sandbox.py."""

import json
import random
import threading
import time

import msgspec
import pytest
from msgspec import UNSET

from codemode.sandbox import (
    FullOutput,
    MemoryLimitExceeded,
    OutputCut,
    OutputLimitExceeded,
    ProgramError,
    ProgramTooLarge,
    RestrictedProcessSandbox,
    RestrictedSandbox,
    RunRequest,
    SandboxLimits,
    SubcallLimitExceeded,
    SubCallReply,
    TimeLimitExceeded,
    WasmSandbox,
    decode_value,
)

from .conftest import EchoHost, echo_tool


def run(sandbox, host, code, tools=(), **limits):
    # A generous wall clock: a test about another limit must see that limit fire first,
    # also on a loaded machine. Tests about the wall clock set their own.
    request = RunRequest(code=code, tools=tuple(tools),
                         limits=SandboxLimits(**{"wall_clock_s": 30.0, **limits}))
    return sandbox.run(request, host)


@pytest.fixture(scope="module", params=["wasm", "restricted", "restricted-process"])
def tier(request):
    """Each shared behaviour runs once per tier (the restricted tier in this process and
    in a supervised worker process)."""
    if request.param == "wasm":
        return WasmSandbox()
    return RestrictedSandbox() if request.param == "restricted" else RestrictedProcessSandbox()


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


@pytest.mark.parametrize("code, value", [
    ("{'rounded': [round(-0.04, 1)]}", {"rounded": [{"$float": "-0.0"}]}),
    ("[float('nan'), float('inf'), -float('inf'), 1.5]",
     [{"$float": "nan"}, {"$float": "inf"}, {"$float": "-inf"}, 1.5]),
    ("import math\nmath.factorial(25)", {"$int": "15511210043330985984000000"}),
    ("[2**63 - 1, -2**63]", [2**63 - 1, -2**63]),
    ("{1: 'a', '1': 'b'}", {"$dict": [[1, "a"], ["1", "b"]]}),
    ("{(1, 2): None}", {"$dict": [[{"$tuple": [1, 2]}, None]]}),
    ("{'$set': 1}", {"$dict": [["$set", 1]]}),
    ("{'$set': 1, 'x': 2}", {"$set": 1, "x": 2}),
    ("(1, [2])", {"$tuple": [1, [2]]}),
    ("{3, 1, 2}", {"$set": [1, 2, 3]}),
    ("frozenset({'a'})", {"$frozenset": ["a"]}),
    ("b'hi'", {"$bytes": "aGk="}),
    ("import datetime as d\n[d.datetime(2024, 1, 2, 3, 4, 5, tzinfo=d.timezone.utc), "
     "d.date(2024, 1, 2), d.time(3, 4), d.timedelta(days=1, seconds=2)]",
     [{"$datetime": "2024-01-02T03:04:05+00:00"}, {"$date": "2024-01-02"},
      {"$time": "03:04:00"}, {"$timedelta": [1, 2, 0]}]),
    ("import decimal\ndecimal.Decimal('1.10')", {"$decimal": "1.10"}),
    ("1+2j", {"$complex": [1.0, 2.0]}),
    ("a = []\na.append(a)\na", [{"$repr": "[...]"}]),
    ("import collections\ncollections.Counter('aab')", {"a": 2, "b": 1}),
    ("import fractions\nfractions.Fraction(1, 3)", {"$repr": "Fraction(1, 3)"}),
    ("'\\ud800'", {"$repr": "'\\ud800'"}),
])
def test_final_values_come_back_without_loss(tier, host, code, value):
    outcome = run(tier, host, code)
    assert (outcome.status, outcome.value) == ("ok", value)


def test_tagged_values_decode_to_the_python_objects(tier, host):
    import datetime
    import math

    from codemode.sandbox import decode_value

    code = ("import datetime, math\n{1: (b'x', {2.5}), 'n': [-0.0, math.factorial(30)], "
            "'t': datetime.datetime(2024, 1, 2)}")
    decoded = decode_value(run(tier, host, code).value)
    assert decoded == {1: (b"x", {2.5}), "n": [0.0, math.factorial(30)],
                       "t": datetime.datetime(2024, 1, 2)}
    assert math.copysign(1, decoded["n"][0]) == -1


@pytest.mark.parametrize("code, whole", [
    ("'x' * 3_000_000", "x" * 3_000_000),
    ("['y' * 1000] * 2000", ["y" * 1000] * 2000),
    ("{str(i): 'z' * 100 for i in range(20_000)}", {str(i): "z" * 100 for i in range(20_000)}),
    ("(1 << 8_000_000, [1.5])", None),
])
def test_a_value_over_the_output_limit_is_cut_to_fit_and_kept_whole(tier, host, code, whole):
    outcome = run(tier, host, code)
    assert (outcome.status, outcome.error) == ("ok", None)
    [cut] = outcome.cut
    assert (cut.part, cut.kept_bytes) == ("value", 1 << 20)
    assert cut.total_bytes == len(msgspec.json.encode(outcome.full.value)) > 1 << 20
    assert len(msgspec.json.encode(outcome.value)) <= 1 << 20
    if whole is not None:
        assert outcome.full.value == whole
    assert "$cut" in json.dumps(outcome.value) or "more characters]" in outcome.value
    assert (outcome.full.stdout, outcome.full.stderr) == (None, None)


def test_a_cut_value_keeps_its_start_and_says_what_was_left_out(tier, host):
    outcome = run(tier, host, "[list(range(100)), 'a' * 2000, ('b' * 10, 'c')]",
                  output_bytes=1000)
    assert outcome.status == "ok"
    first, text, rest = outcome.value
    assert first == list(range(100))
    assert text.startswith("a" * 500) and text.endswith(" more characters]")
    assert rest == {"$cut": "1 more items"}
    assert decode_value(outcome.full.value)[2] == ("b" * 10, "c")


@pytest.mark.parametrize("code", ["'x' * 3_000_000", "s = 'x' * 20_000_000\ns",
                                  "['y' * 1000] * 3000", "1 << 16_000_000"])
def test_a_value_over_the_output_cap_ends_the_run_at_the_output_limit(tier, host, code):
    outcome = run(tier, host, code, full_output_bytes=2_000_000)
    assert (outcome.status, outcome.value, outcome.full) == ("limit", UNSET, None)
    assert outcome.error == OutputLimitExceeded(
        message="the final value is more than 2000000 bytes of JSON, over the output "
                "limit of 2000000 bytes")


def test_output_written_before_a_timeout_is_returned(tier, host):
    code = ("import warnings\nprint('started')\nwarnings.warn('oops')\n"
            "print('partial', end='')\nwhile True:\n    pass")
    outcome = run(tier, host, code, wall_clock_s=0.5)
    assert isinstance(outcome.error, TimeLimitExceeded)
    assert outcome.stdout == "started\npartial"
    assert "UserWarning: oops" in outcome.stderr


def test_output_written_before_the_subcall_limit_is_returned(tier, host):
    code = "for i in range(10):\n    print(i)\n    echo(value=i)"
    outcome = run(tier, host, code, tools=[echo_tool()], max_subcalls=2)
    assert isinstance(outcome.error, SubcallLimitExceeded)
    assert outcome.stdout == "0\n1\n2\n"


def test_stderr_is_returned_on_success(tier, host):
    outcome = run(tier, host, "import warnings\nwarnings.warn('careful')\n1")
    assert (outcome.status, outcome.value) == ("ok", 1)
    assert "UserWarning: careful" in outcome.stderr


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


def held(started, wall_clock_s):
    """Whether a run that began at `started` ended near its deadline: within 4x the limit
    plus a second (a margin for a loaded machine; a missed deadline runs for ever)."""
    return time.monotonic() - started < 4 * wall_clock_s + 1.0


def test_infinite_loop_hits_the_wall_clock_limit(tier, host):
    started = time.monotonic()
    outcome = run(tier, host, "while True:\n    pass", wall_clock_s=0.5)
    assert isinstance(outcome.error, TimeLimitExceeded)
    assert outcome.status == "limit"
    assert held(started, 0.5)


def test_sleep_counts_against_the_wall_clock(tier, host):
    started = time.monotonic()
    outcome = run(tier, host, "import time\nwhile True:\n    time.sleep(10)", wall_clock_s=0.5)
    assert isinstance(outcome.error, TimeLimitExceeded)
    assert held(started, 0.5)


def test_finally_cannot_extend_the_run(tier, host):
    code = "try:\n    while True: pass\nfinally:\n    while True: pass"
    outcome = run(tier, host, code, wall_clock_s=0.5)
    assert isinstance(outcome.error, TimeLimitExceeded)


def test_output_over_the_limit_is_cut_with_a_marker_and_the_run_goes_on(tier, host):
    outcome = run(tier, host, "print('x' * 5000)\nprint('after')\n7", output_bytes=1000)
    assert (outcome.status, outcome.error, outcome.value) == ("ok", None, 7)
    assert outcome.stdout == "x" * 1000 + "\n[... stdout truncated at 1000 bytes of 5007]\n"
    assert outcome.cut == (OutputCut(part="stdout", kept_bytes=1000, total_bytes=5007),)
    assert outcome.full == FullOutput(stdout="x" * 5000 + "\nafter\n")


def test_output_past_its_cap_ends_the_run_at_the_output_limit(tier, host):
    outcome = run(tier, host, "print('x' * 5000)", output_bytes=1000, full_output_bytes=2000)
    assert outcome.error == OutputLimitExceeded(message="stdout exceeded 2000 bytes")
    assert outcome.stdout == ("x" * 1000 + "\n[... stdout truncated at 1000 bytes of more "
                              "than 2000]\n")
    assert outcome.full.stdout == "x" * 2000 + "\n[... stdout truncated at 2000 bytes]\n"
    assert outcome.cut == (OutputCut(part="stdout", kept_bytes=1000, total_bytes=2000),)


def test_catching_the_output_limit_does_not_undo_it(tier, host):
    code = ("for i in range(10**4):\n    try:\n        print('y' * 100)\n"
            "    except BaseException:\n        pass\n'done'")
    outcome = run(tier, host, code, output_bytes=1000, full_output_bytes=1000)
    assert isinstance(outcome.error, OutputLimitExceeded)


def test_output_is_handed_to_on_output_as_it_is_written(tier, host):
    """Each piece reaches the callback while the program still runs: the program waits
    for the host (a tool call) after printing, and the host waits for what it printed."""
    seen = []
    printed = threading.Event()

    def on_output(stream, text):
        seen.append((stream, text))
        if "".join(t for s, t in seen if s == "stdout") == "first\n":
            printed.set()

    def dispatch(batch):
        assert printed.wait(30), "the output did not arrive while the program ran"
        return host(batch)

    code = ("import warnings\nprint('first')\nwarnings.warn('oops')\necho(value=1)\n"
            "print('second')\n'v'")
    request = RunRequest(code=code, tools=(echo_tool(),), limits=SandboxLimits())
    outcome = tier.run(request, dispatch, on_output=on_output)
    assert (outcome.status, outcome.error) == ("ok", None)
    assert "".join(t for s, t in seen if s == "stdout") == outcome.stdout == "first\nsecond\n"
    assert "".join(t for s, t in seen if s == "stderr") == outcome.stderr
    assert "UserWarning: oops" in outcome.stderr


def test_on_output_gets_the_whole_stream_and_the_cap_marker(tier, host):
    seen = []
    request = RunRequest(code="for i in range(50):\n    print('z' * 99)",
                         limits=SandboxLimits(output_bytes=1000, full_output_bytes=3000,
                                              wall_clock_s=30.0))
    outcome = tier.run(request, host, on_output=lambda s, t: seen.append(t))
    assert isinstance(outcome.error, OutputLimitExceeded)
    assert "".join(seen) == outcome.full.stdout == ("z" * 99 + "\n") * 30 + \
        "\n[... stdout truncated at 3000 bytes]\n"


def test_an_on_output_that_raises_changes_nothing(tier, host):
    def broken(stream, text):
        raise RuntimeError("caller bug")

    request = RunRequest(code="print('a')\nprint('b')\n1", limits=SandboxLimits())
    outcome = tier.run(request, host, on_output=broken)
    assert (outcome.status, outcome.stdout, outcome.value) == ("ok", "a\nb\n", 1)


def test_a_program_ended_by_memory_error_is_at_the_memory_limit_it_names(tier, host):
    outcome = run(tier, host, "raise MemoryError()", memory_bytes=64 << 20)
    assert isinstance(outcome.error, MemoryLimitExceeded)
    assert outcome.error.message == (f"the program ran out of its memory limit of {64 << 20} "
                                     "bytes (64 MiB)")


@pytest.mark.parametrize("extra, refused", [(0, False), (1, True)])
def test_a_program_over_its_size_limit_is_refused_before_it_runs(tier, host, extra, refused):
    code = "print('ran')\n# " + "é" * 40            # 95 bytes of UTF-8 in 55 characters
    size = len(code.encode())
    outcome = run(tier, host, code, code_bytes=size - extra)
    if not refused:
        assert (outcome.status, outcome.stdout) == ("ok", "ran\n")
        return
    assert (outcome.status, outcome.stdout) == ("limit", "")
    assert isinstance(outcome.error, ProgramTooLarge)
    assert outcome.error.message == (f"the program is {size} bytes, over its limit of "
                                     f"{size - 1} bytes (code_bytes)")


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
    ("echo(1, 2)", "echo() takes from 0 to 1 positional arguments but 2 were given"),
    ("echo(1, value=2)", "echo() got multiple values for argument 'value'"),
    ("need()", "need() missing 1 required positional argument: 'a'"),
    ("need(a=1, b=2)", "need() got an unexpected keyword argument 'b'"),
])
def test_call_shape_errors_read_like_python_and_reach_the_host(tier, host, code, message):
    # A call of the wrong shape is still a call: sent with `invalid` (the Python-style
    # message) so the host records it, and refused as ToolArgumentError, a TypeError.
    tools = [echo_tool(), echo_tool("need", params=(("a", True),), extra=False)]
    name = code.split("(")[0]
    probe = (f"try:\n    {code}\nexcept TypeError as e:\n"
             "    r = [type(e).__name__, e.code, e.message]\nr")
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
        time.sleep(min(batch.wait_s, 10))              # honours the bounded wait
        return SubCallReply()

    started = time.monotonic()
    outcome = run(tier, slow, "echo(value=1)", tools=[echo_tool()], wall_clock_s=0.5)
    assert isinstance(outcome.error, TimeLimitExceeded)
    assert held(started, 0.5)


def test_arguments_over_the_request_limit_are_refused_in_the_program(tier, host):
    outcome = run(tier, host, "echo(value='x' * 2000)", tools=[echo_tool()],
                  request_bytes=1000)
    assert outcome.error.type == "ValueError"
    assert outcome.error.message == ("arguments of echo(...) are 2012 bytes of JSON, over the "
                                     "sandbox's limit of 1000 bytes per sub-call")
    assert host.calls == []


@pytest.mark.parametrize("code, message", [
    ("import socket", "No module named 'socket' (not available in the sandbox)"),
    ("import subprocess", "No module named 'subprocess' (not available in the sandbox)"),
    ("from asyncio import subprocess",
     "No module named 'asyncio.subprocess' (not available in the sandbox)"),
    ("import numpy as np", "No module named 'numpy' (not available in the sandbox)"),
])
def test_unavailable_imports_raise_module_not_found(tier, host, code, message):
    outcome = run(tier, host, code)
    assert (outcome.error.type, outcome.error.message) == ("ModuleNotFoundError", message)


def _importable(tier, host, names):
    """The names among `names` that a program on `tier` can import."""
    lines = ["ok = []"]
    for name in sorted(names):
        lines += [f"try:\n    import {name}\nexcept ImportError:\n    pass",
                  f"else:\n    ok.append({name!r})"]
    outcome = run(tier, host, "\n".join(lines) + "\nok")
    if getattr(outcome.error, "type", None) == "SyntaxError":
        # The restricted tier refuses to compile some names (`builtins`): one run per name,
        # and a name it cannot compile is one a program cannot import.
        return {name for name in names
                if run(tier, host, f"import {name}").status == "ok"}
    assert outcome.status == "ok", outcome.error
    return set(outcome.value)


def _preloaded_by_the_guest():
    """Every module the guest's entry point imports (and so keeps in its snapshot)."""
    import ast
    from pathlib import Path

    import codemode.sandbox
    source = (Path(codemode.sandbox.__file__).parent / "guest" / "guest_main.py").read_text()
    return {alias.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import)
            for alias in node.names}


def test_allowed_modules_are_exactly_what_a_program_can_import(tier, host):
    from codemode.sandbox import _restricted_modules
    from codemode.sandbox.guest.cm_guest import modules

    implicit = (modules.IMPORTABLE - modules.AVAILABLE if isinstance(tier, WasmSandbox)
                else _restricted_modules._IMPLICIT_MODULES)
    candidates = {n for n in _preloaded_by_the_guest() | WasmSandbox.allowed_modules
                  | {"socket", "subprocess", "importlib", "ctypes", "inspect", "threading"}
                  if modules.is_public(n)}         # a program cannot spell private names
    assert WasmSandbox.allowed_modules <= candidates
    expected = set(tier.allowed_modules)
    if not isinstance(tier, WasmSandbox):
        # RestrictedPython compiles no `import __future__` (an underscored name), but its
        # directive form works there.
        expected.discard("__future__")
        assert run(tier, host, "from __future__ import annotations\nx: int = 1\nx").value == 1
    assert _importable(tier, host, candidates) - implicit == expected


def test_curated_stdlib_is_importable(tier, host):
    code = ("import json, re, math, statistics, decimal, fractions, datetime, collections, "
            "itertools, functools, operator, heapq, bisect, string, textwrap, difflib, random, "
            "hashlib, base64, csv, io, dataclasses, typing, enum, copy, pprint, urllib.parse, "
            "html, unicodedata, calendar, time, asyncio\n"
            "datetime.datetime.strptime('2024-02-03', '%Y-%m-%d').day + statistics.mean([1, 3])")
    outcome = run(tier, host, code)
    assert outcome.status == "ok", outcome.error
    assert outcome.value == 5


def test_call_tool_errors_name_call_tool(tier, host):
    outcome = run(tier, host, "call_tool('echo', 1)")
    assert (outcome.error.type, outcome.error.message) == (
        "TypeError", "call_tool() takes 1 positional argument but 2 were given")


def test_exception_notes_follow_the_exception_line(tier, host):
    code = ("try:\n    raise ValueError('bad')\nexcept ValueError as e:\n"
            "    e.add_note('while parsing row 3')\n    raise")
    outcome = run(tier, host, code)
    assert outcome.error.message == "bad"
    assert outcome.error.traceback.endswith("ValueError: bad\nwhile parsing row 3\n")


DEEP = "x = []\nfor i in range(10_000):\n    x = [x]\n"


@pytest.mark.parametrize("code", [
    "a = []\na.append(a)\nb = []\nb.append(b)\nop = lambda: a == b",
    DEEP + "op = lambda: repr(x)",
    DEEP + "import json\nop = lambda: json.dumps(x)",
    DEEP + "import copy\nop = lambda: copy.deepcopy(x)",
    DEEP + "op = lambda: x == [[x]]",
])
def test_deep_structures_raise_a_catchable_recursion_error_or_complete(tier, host, code):
    program = code + ("\ntry:\n    op()\n    ended = 'completed'\nexcept RecursionError:\n"
                      "    ended = 'RecursionError'\n[ended, sum(range(10))]")
    outcome = run(tier, host, program, wall_clock_s=30.0)
    assert outcome.status == "ok", outcome.error
    assert outcome.value[0] in ("completed", "RecursionError")
    assert outcome.value[1] == 45


def test_freeing_a_deeply_nested_structure_completes(tier, host):
    code = ("x = []\nfor i in range(100_000):\n    x = [x]\ndel x\n"
            "d = {}\nfor i in range(100_000):\n    d = {'k': d}\nd = None\n'freed'")
    assert run(tier, host, code, wall_clock_s=30.0).value == "freed"


def test_output_written_before_a_cancellation_is_returned(tier, host):
    import threading

    cancel = threading.Event()
    timer = threading.Timer(0.3, cancel.set)
    timer.start()
    try:
        request = RunRequest(code="print('started')\nwhile True:\n    pass",
                             limits=SandboxLimits(wall_clock_s=5.0))
        outcome = tier.run(request, host, cancel)
    finally:
        timer.cancel()
    assert outcome.error.kind == "abort"
    assert outcome.stdout == "started\n"


def test_a_memory_limit_in_no_whole_mib_is_named_in_bytes_alone(tier, host):
    outcome = run(tier, host, "raise MemoryError()", memory_bytes=(64 << 20) + 4096)
    assert outcome.error.message == ("the program ran out of its memory limit of "
                                     f"{(64 << 20) + 4096} bytes")
