"""WasmSandbox against the real component: what the wasm tier does beyond the shared
contract (test_sandbox_contract.py): memory, fuel and stack limits, isolation, the async
bridge, values that cannot leave the instance."""

import pytest

from codemode.sandbox import (FuelExhausted, GuestCrashed, MemoryLimitExceeded,
                              OutputLimitExceeded, ProgramError, RunRequest, SandboxLimits,
                              SubcallLimitExceeded)

from .conftest import echo_tool


def run(sandbox, host, code, tools=(), **limits):
    return sandbox.run(RunRequest(code=code, tools=tuple(tools),
                                  limits=SandboxLimits(**{"wall_clock_s": 3.0, **limits})),
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


def test_fuel_exhaustion_is_typed(sandbox, host):
    from codemode.sandbox import FuelExhausted
    outcome = run(sandbox, host, "while True:\n    pass", fuel=50_000_000)
    assert isinstance(outcome.error, FuelExhausted)
    assert outcome.fuel_used == 50_000_000


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
    outcome = run(sandbox, host, "import os\n[dict(os.environ), os.listdir('/') if hasattr(os, 'listdir') else []]")
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
    code = "for i in range(100):\n    try:\n        echo(value=i)\n    except BaseException:\n        pass"
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


def test_output_written_before_fuel_runs_out_is_returned(sandbox, host):
    code = "import sys\nprint('a')\nsys.stderr.write('b')\nwhile True:\n    pass"
    outcome = run(sandbox, host, code, fuel=200_000_000)
    assert isinstance(outcome.error, FuelExhausted)
    assert (outcome.stdout, outcome.stderr) == ("a\n", "b")


def test_writing_past_the_limit_through_the_file_descriptor_ends_the_run(sandbox, host):
    code = "import os\nos.write(1, b'x' * 600)\nwhile True:\n    os.write(1, b'y' * 600)"
    outcome = run(sandbox, host, code, output_bytes=1000)
    assert outcome.error == OutputLimitExceeded(message="stdout exceeded 1000 bytes")
    assert outcome.stdout == "x" * 600 + "y" * 400 + "\n[... stdout truncated at 1000 bytes]\n"


def test_a_program_that_catches_the_output_limit_is_ended_by_the_host(sandbox, host):
    code = "while True:\n    try:\n        print('y' * 100)\n    except BaseException:\n        pass"
    outcome = run(sandbox, host, code, output_bytes=1000, wall_clock_s=30)
    assert isinstance(outcome.error, OutputLimitExceeded)
    assert outcome.duration_s < 5
