"""WasmSandbox against the real component: what the wasm tier does beyond the shared
contract (test_sandbox_contract.py): memory, fuel and stack limits, isolation, the async
bridge, values that cannot leave the instance."""

import pytest

from codemode.sandbox import (
    FuelExhausted,
    GuestCrashed,
    HostDispatchFailed,
    MemoryLimitExceeded,
    OutputLimitExceeded,
    ProgramError,
    RunRequest,
    SandboxLimits,
    SubcallLimitExceeded,
    SubCallOk,
    SubCallReply,
)

from .conftest import echo_tool


def run(sandbox, host, code, tools=(), **limits):
    # A generous wall clock, so the limit a test is about fires first on a loaded machine.
    return sandbox.run(RunRequest(code=code, tools=tuple(tools),
                                  limits=SandboxLimits(**{"wall_clock_s": 30.0, **limits})),
                       host)


def test_os_exit_ends_the_program_like_sys_exit(sandbox, host):
    outcome = run(sandbox, host, "import os\nos._exit(4)")
    assert (outcome.error.type, outcome.error.message) == ("SystemExit",
                                                           "the program called sys.exit(4)")


def test_sys_exit_message_names_the_code(sandbox, host):
    outcome = run(sandbox, host, "import sys\nsys.exit(3)")
    assert outcome.error.message == "the program called sys.exit(3)"


def test_memory_bomb_is_a_memory_limit(sandbox, host):
    outcome = run(sandbox, host, "s = 'x' * 10**6\nwhile True:\n    s = s + s",
                  memory_bytes=64 << 20)
    assert isinstance(outcome.error, MemoryLimitExceeded)
    assert outcome.error.message == (f"the program ran out of its memory limit of {64 << 20} "
                                     "bytes (64 MiB)")


def test_fuel_exhaustion_is_typed(sandbox, host):
    from codemode.sandbox import FuelExhausted
    outcome = run(sandbox, host, "while True:\n    pass", fuel=50_000_000)
    assert isinstance(outcome.error, FuelExhausted)
    assert outcome.fuel_used == 50_000_000


@pytest.mark.slow
def test_deep_native_recursion_ends_the_run_without_harming_the_host(sandbox, host):
    outcome = run(sandbox, host, "l = []\nfor i in range(100000):\n    l = [l]\nrepr(l)")
    assert outcome.status in ("error", "limit")
    assert isinstance(outcome.error, (GuestCrashed, ProgramError))
    assert run(sandbox, host, "1 + 1").value == 2          # the next run is unaffected


def test_os_process_functions_fail_inside(sandbox, host):
    outcome = run(sandbox, host, "import os\nos.system('touch /tmp/x')")
    assert outcome.status == "error"
    assert outcome.error.type == "AttributeError"


def test_environment_and_filesystem_are_empty(sandbox, host):
    outcome = run(sandbox, host, "import os\n[dict(os.environ),"
                                 " os.listdir('/') if hasattr(os, 'listdir') else []]")
    assert outcome.status in ("ok", "error")
    if outcome.status == "ok":
        assert outcome.value[0] == {}
    outcome = run(sandbox, host, "open('/etc/passwd').read()")
    assert outcome.status == "error"


def test_unpaired_surrogates_in_values_and_messages_do_not_crash_the_instance(sandbox, host):
    assert run(sandbox, host, "'a\\udfff'").value == {"$repr": "'a\\udfff'"}
    outcome = run(sandbox, host, "raise ValueError('\\ud800')")
    assert outcome.error.message == "\ufffd"


def test_streams_are_real_text_streams(sandbox, host):
    outcome = run(sandbox, host, "import sys, io\nsys.stdout.write('a')\n"
                                 "isinstance(sys.stdout, io.TextIOWrapper)")
    assert (outcome.stdout, outcome.value) == ("a", True)


# ---- the tool bridge ------------------------------------------------------------------

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
    code = ("for i in range(100):\n    try:\n        echo(value=i)\n"
            "    except BaseException:\n        pass")
    outcome = run(sandbox, host, code, tools=[echo_tool()], max_subcalls=10)
    assert isinstance(outcome.error, SubcallLimitExceeded)
    assert len(host.calls) == 10


def test_deeply_nested_arguments_are_refused_before_encoding(sandbox, host):
    code = "v = []\nfor _ in range(50_000):\n    v = [v]\necho(value=v)"
    outcome = run(sandbox, host, code, tools=[echo_tool()])
    assert outcome.error.type == "TypeError"
    assert "nested more than 500 levels deep" in outcome.error.message
    assert host.calls == []


def test_arguments_over_the_request_limit_are_refused_in_the_guest(sandbox, host):
    outcome = run(sandbox, host, "echo(value='x' * 2000)", tools=[echo_tool()],
                  request_bytes=1000)
    assert outcome.error.type == "ValueError"
    assert host.calls == []


def test_no_module_beyond_the_allowed_list_is_importable(sandbox, host):
    """Every module loaded in the guest, tried by name: only the listed ones and the private
    helpers C code imports lazily come back."""
    from codemode.sandbox.guest.cm_guest import modules

    code = ("import sys\nok = []\nfor name in sorted(sys.modules):\n"
            "    try:\n        __import__(name)\n    except ImportError:\n        pass\n"
            "    else:\n        ok.append(name)\nok")
    outcome = run(sandbox, host, code)
    assert outcome.status == "ok", outcome.error
    assert set(outcome.value) - (modules.IMPORTABLE - modules.AVAILABLE) == \
        sandbox.allowed_modules


# ---- the program owns everything inside the instance: the host checks again -------------

RAW = 'import sys\nhost = sys.modules["wit_world.imports.host"]\n'


def raw_batch(args_json):
    return ('{"calls":[{"id":9,"name":"echo","args":' + args_json
            + '}],"cancel":[],"wait_s":null,"until":[9]}')


def test_a_batch_written_by_hand_over_the_request_limit_is_refused_by_the_host(sandbox, host):
    big = '{"value": "' + "x" * 2000 + '"}'
    code = RAW + f"host.dispatch({raw_batch(big)!r})"
    outcome = run(sandbox, host, code, tools=[echo_tool()], request_bytes=1000)
    assert isinstance(outcome.error, HostDispatchFailed)
    assert outcome.error.message == ("the arguments of sub-call 9 are 2013 bytes of JSON, "
                                     "over the limit of 1000 bytes")
    assert host.calls == []


@pytest.mark.parametrize("args_json", ["[" * 100_000 + "]" * 100_000, '{"value": 1e400}'])
def test_a_batch_the_host_cannot_decode_ends_the_run_inside(sandbox, host, args_json):
    outcome = run(sandbox, host, RAW + f"host.dispatch({raw_batch(args_json)!r})",
                  tools=[echo_tool()])
    assert isinstance(outcome.error, HostDispatchFailed)
    assert outcome.error.message.startswith("malformed sub-call batch: ")
    assert host.calls == []


def test_invalid_utf8_bytes_cannot_triple_the_output_limit(sandbox, host):
    outcome = run(sandbox, host, "import sys\nsys.stdout.buffer.write(b'\\xff' * 9_000)",
                  output_bytes=10_000)
    # 9,000 bytes fit the limit, but each becomes a 3-byte U+FFFD when decoded: the text the
    # host hands on is cut to the limit too, and says so; the whole text is kept.
    assert len(outcome.stdout.encode()) <= 10_000 + 64
    assert outcome.stdout.endswith("[... stdout truncated at 10000 bytes of 27000]\n")
    assert outcome.full.stdout == "\ufffd" * 9_000


def test_a_forged_outcome_is_a_crash_not_an_exception_in_the_host(sandbox, host):
    code = ('import sys\nsys.modules["cm_guest.runtime"].encode_outcome = '
            'lambda outcome, limit: \'{"status": "error", "stdout": 7}\'')
    outcome = run(sandbox, host, code)
    assert isinstance(outcome.error, GuestCrashed)
    assert outcome.error.message.startswith("the sandbox returned a malformed outcome: ")
    assert run(sandbox, host, "1 + 1").value == 2


def test_output_written_before_fuel_runs_out_is_returned(sandbox, host):
    code = "import sys\nprint('a')\nsys.stderr.write('b')\nwhile True:\n    pass"
    outcome = run(sandbox, host, code, fuel=200_000_000, wall_clock_s=60.0)
    assert isinstance(outcome.error, FuelExhausted)
    assert (outcome.stdout, outcome.stderr) == ("a\n", "b")


def test_writing_past_the_limit_through_the_file_descriptor_ends_the_run(sandbox, host):
    code = "import os\nos.write(1, b'x' * 600)\nwhile True:\n    os.write(1, b'y' * 600)"
    outcome = run(sandbox, host, code, output_bytes=1000, full_output_bytes=1000,
                  wall_clock_s=30.0)
    assert outcome.error == OutputLimitExceeded(message="stdout exceeded 1000 bytes")
    assert outcome.stdout == ("x" * 600 + "y" * 400 +
                              "\n[... stdout truncated at 1000 bytes of more than 1000]\n")


def test_a_program_that_catches_the_output_limit_is_ended_by_the_host(sandbox, host):
    code = ("while True:\n    try:\n        print('y' * 100)\n"
            "    except BaseException:\n        pass")
    outcome = run(sandbox, host, code, output_bytes=1000, full_output_bytes=1000,
                  wall_clock_s=30)
    assert isinstance(outcome.error, OutputLimitExceeded)
    assert outcome.duration_s < 5


# ---- CPython 3.14's own error text (the guest is CPython 3.14; written out by hand) ------

@pytest.mark.parametrize("code, message, traceback", [
    ("prnt('x')", "name 'prnt' is not defined. Did you mean: 'print'?",
     'Traceback (most recent call last):\n'
     '  File "<program>", line 1, in <module>\n'
     "    prnt('x')\n"
     "    ^^^^\n"
     "NameError: name 'prnt' is not defined. Did you mean: 'print'?\n"),
    ("sys.version", "name 'sys' is not defined. Did you forget to import 'sys'?",
     'Traceback (most recent call last):\n'
     '  File "<program>", line 1, in <module>\n'
     "    sys.version\n"
     "    ^^^\n"
     "NameError: name 'sys' is not defined. Did you forget to import 'sys'?\n"),
    ("items = []\nitems.appendd(1)",
     "'list' object has no attribute 'appendd'. Did you mean: 'append'?",
     'Traceback (most recent call last):\n'
     '  File "<program>", line 2, in <module>\n'
     "    items.appendd(1)\n"
     "    ^^^^^^^^^^^^^\n"
     "AttributeError: 'list' object has no attribute 'appendd'. Did you mean: 'append'?\n"),
    ("import math\nmath.sqroot(4)",
     "module 'math' has no attribute 'sqroot'. Did you mean: 'sqrt'?",
     'Traceback (most recent call last):\n'
     '  File "<program>", line 2, in <module>\n'
     "    math.sqroot(4)\n"
     "    ^^^^^^^^^^^\n"
     "AttributeError: module 'math' has no attribute 'sqroot'. Did you mean: 'sqrt'?\n"),
    ("try:\n    raise ValueError('bad')\nexcept ValueError as e:\n"
     "    e.add_note('while parsing row 3')\n    raise",
     "bad",
     'Traceback (most recent call last):\n'
     '  File "<program>", line 2, in <module>\n'
     "    raise ValueError('bad')\n"
     "ValueError: bad\n"
     "while parsing row 3\n"),
    ("raise ExceptionGroup('two', [ValueError('a'), TypeError('b')])",
     "two (2 sub-exceptions)",
     '  + Exception Group Traceback (most recent call last):\n'
     '  |   File "<program>", line 1, in <module>\n'
     "  |     raise ExceptionGroup('two', [ValueError('a'), TypeError('b')])\n"
     "  | ExceptionGroup: two (2 sub-exceptions)\n"
     "  +-+---------------- 1 ----------------\n"
     "    | ValueError: a\n"
     "    +---------------- 2 ----------------\n"
     "    | TypeError: b\n"
     "    +------------------------------------\n"),
    ("for x in range(3)\n    pass", "expected ':' (<program>, line 1)",
     '  File "<program>", line 1\n'
     "    for x in range(3)\n"
     "                     ^\n"
     "SyntaxError: expected ':'\n"),
    ("call_tool('echo', 1)", "call_tool() takes 1 positional argument but 2 were given",
     'Traceback (most recent call last):\n'
     '  File "<program>", line 1, in <module>\n'
     "    call_tool('echo', 1)\n"
     "    ~~~~~~~~~^^^^^^^^^^^\n"
     "TypeError: call_tool() takes 1 positional argument but 2 were given\n"),
    ("def f():\n    try:\n        1 / 0\n    except ZeroDivisionError as e:\n"
     "        raise KeyError('k') from e\nf()", "'k'",
     'Traceback (most recent call last):\n'
     '  File "<program>", line 3, in f\n'
     "    1 / 0\n"
     "    ~~^~~\n"
     "ZeroDivisionError: division by zero\n"
     "\n"
     "The above exception was the direct cause of the following exception:\n"
     "\n"
     'Traceback (most recent call last):\n'
     '  File "<program>", line 6, in <module>\n'
     "    f()\n"
     "    ~^^\n"
     '  File "<program>", line 5, in f\n'
     "    raise KeyError('k') from e\n"
     "KeyError: 'k'\n"),
])
def test_errors_read_exactly_as_cpython_prints_them(sandbox, host, code, message, traceback):
    outcome = run(sandbox, host, code)
    assert (outcome.error.message, outcome.error.traceback) == (message, traceback)


def test_a_failing_tool_call_shows_only_program_frames(sandbox):
    from .conftest import EchoHost
    outcome = run(sandbox, EchoHost(fail={"echo"}), "def go():\n    return echo(value=1)\ngo()",
                  tools=[echo_tool()])
    assert outcome.error.traceback == (
        'Traceback (most recent call last):\n'
        '  File "<program>", line 3, in <module>\n'
        "    go()\n"
        "    ~~^^\n"
        '  File "<program>", line 2, in go\n'
        "    return echo(value=1)\n"
        "ToolDenied: echo: echo is not allowed\n")


@pytest.mark.parametrize("operation", ["pickle.dumps(x)", "repr(x)", "x == [[x]]",
                                       "json.dumps(x)", "copy.deepcopy(x)"])
def test_c_recursion_on_100k_deep_data_is_a_recursion_error(sandbox, host, operation):
    code = ("import copy, json, pickle\nx = []\nfor i in range(100_000):\n    x = [x]\n"
            f"try:\n    {operation}\n    r = 'completed'\nexcept RecursionError as e:\n"
            "    r = type(e).__name__\nr")
    outcome = run(sandbox, host, code, wall_clock_s=30.0)
    assert (outcome.status, outcome.value) == ("ok", "RecursionError")


def test_the_c_stack_check_names_what_overflowed(sandbox, host):
    outcome = run(sandbox, host, "a = []\na.append(a)\nb = []\nb.append(b)\na == b")
    assert outcome.error.type == "RecursionError"
    assert outcome.error.message.startswith("Stack overflow (used ")
    assert outcome.error.message.endswith(" kB) in comparison")


@pytest.mark.slow
def test_output_written_before_the_instance_traps_is_returned(sandbox, host):
    code = ("print('before')\nx = []\nfor i in range(2_000_000):\n    x = [x]\n"
            "print('built')\ndel x")
    outcome = run(sandbox, host, code, memory_bytes=512 << 20, wall_clock_s=60.0)
    assert isinstance(outcome.error, GuestCrashed)
    assert outcome.stdout == "before\nbuilt\n"


@pytest.mark.parametrize("depth", [900, 2_000])
def test_a_deeply_nested_final_value_comes_back_cut_not_failed(sandbox, host, depth):
    code = f"x = []\nfor _ in range({depth}):\n    x = [x]\nx"
    outcome = run(sandbox, host, code)
    assert outcome.status == "ok", outcome.error
    level, value = 0, outcome.value
    while isinstance(value, list):
        level, value = level + 1, value[0]
    assert level == 500 and value == {"$cut": "list nested deeper than 500 levels"}


# ---- output capture: one drain thread for the process, the rest read by the run itself ----

def test_output_larger_than_a_pipe_buffer_is_captured_whole_and_in_order(sandbox, host):
    code = ("import os, sys\nfor i in range(300):\n    print(f'{i:04d}' + 'x' * 996)\n"
            "sys.stderr.write('e' * 200_000)\nview = b'!' * 100_000\n"
            "while view:\n    view = view[os.write(1, view):]\n1")
    outcome = run(sandbox, host, code, output_bytes=2_000_000)
    assert outcome.value == 1
    lines = outcome.stdout.split("\n")
    assert [line[:4] for line in lines[:300]] == [f"{i:04d}" for i in range(300)]
    assert lines[300] == "!" * 100_000
    assert outcome.stderr == "e" * 200_000


def test_concurrent_runs_each_keep_only_their_own_output(sandbox, host):
    import concurrent.futures

    def one(n):
        code = (f"import sys\nfor i in range(200):\n    print('run{n}-' + str(i) + 'y' * 900)"
                f"\nsys.stderr.write('err{n}')\n{n}")
        return n, run(sandbox, host, code, output_bytes=1_000_000)

    with concurrent.futures.ThreadPoolExecutor(4) as workers:
        outcomes = list(workers.map(one, range(8)))
    for n, outcome in outcomes:
        assert outcome.value == n
        assert outcome.stdout.splitlines() == [f"run{n}-{i}" + "y" * 900 for i in range(200)]
        assert outcome.stderr == f"err{n}"


def test_instances_share_one_output_thread_and_leave_no_pipe_open(sandbox, host):
    import os

    run(sandbox, host, "print('warm')")
    fds, threads = len(os.listdir("/proc/self/fd")), len(os.listdir("/proc/self/task"))
    for i in range(20):
        assert run(sandbox, host, f"print({i})").stdout == f"{i}\n"
    # the pool may have started its background runner meanwhile, and may hold one ready
    # instance and one Store waiting to be closed (2 fds each)
    assert len(os.listdir("/proc/self/task")) <= threads + 1
    assert len(os.listdir("/proc/self/fd")) <= fds + 4


_FORKING_PROGRAM = """
import os, sys
from codemode.sandbox import RunRequest, SandboxLimits, SubCallReply, TimeLimitExceeded
from codemode.sandbox import WasmSandbox

sandbox = WasmSandbox()
def run(code, wall_clock_s=30.0):
    return sandbox.run(RunRequest(code=code, limits=SandboxLimits(wall_clock_s=wall_clock_s)),
                       lambda batch: SubCallReply())
run("print('parent')")                          # the parent's threads are under way
pid = os.fork()
if pid == 0:                                    # the child: its own ticker, drain, runners
    ok = False
    try:
        out = run("print('child')\\n2")
        timed = run("while True:\\n    pass", wall_clock_s=0.5)
        ok = (out.stdout, out.value) == ("child\\n", 2) and isinstance(
            timed.error, TimeLimitExceeded)
        if not ok:
            os.write(2, f"child: {out!r} {timed!r}\\n".encode())
    finally:
        os._exit(0 if ok else 1)
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def test_a_forked_child_runs_programs_with_their_output_and_deadline():
    # In an interpreter of its own: forking this one, with the threads of every earlier
    # test (event loops, MCP clients, worker supervisors), could copy a lock another
    # thread holds, which no fix of the sandbox's own threads can prevent.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _FORKING_PROGRAM], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("value", ["", "héllo ☃ 𝄞 \u2028", "x" * 300_000, [None, 1.5, {}]])
def test_a_sub_calls_text_crosses_the_wit_boundary_unchanged_both_ways(sandbox, value):
    seen = []

    def dispatch(batch):
        seen.extend(c.arguments["value"] for c in batch.calls)
        return SubCallReply(results=tuple(SubCallOk(id=c.id, value=[c.arguments["value"]])
                                          for c in batch.calls))

    code = f"v = echo(value={value!r})[0]\nv == {value!r} and len(repr(v))"
    outcome = run(sandbox, dispatch, code, tools=[echo_tool()], output_bytes=2 << 20)
    assert (outcome.value, seen) == (len(repr(value)), [value])


def test_a_run_request_encodes_the_same_tools_tuple_once_and_anything_mutable_each_time():
    import msgspec

    from codemode.sandbox import ParamSpec, ToolSpec, _wasm

    frozen = (ToolSpec(name="t", alias="t", params=(ParamSpec(name="a", default=1),)),)
    first = _wasm._tools_json(frozen)
    assert _wasm._tools_json(frozen) is first                       # kept
    assert bytes(first) == msgspec.json.encode(frozen)
    assert _wasm._tools_json(tuple(frozen)) is first                # the same tuple

    default: list[int] = [1]
    mutable = (ToolSpec(name="t", alias="t", params=(ParamSpec(name="a", default=default),)),)
    before = bytes(_wasm._tools_json(mutable))
    default.append(2)                          # a default changed in place: encoded again
    assert bytes(_wasm._tools_json(mutable)) == msgspec.json.encode(mutable) != before
    as_list = list(frozen)
    assert bytes(_wasm._tools_json(as_list)) == msgspec.json.encode(as_list)  # type: ignore[arg-type]
