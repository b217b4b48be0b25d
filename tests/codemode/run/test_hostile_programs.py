"""Hostile or broken programs through run_code: each a typed outcome with a clear message;
the host survives; the log keeps one tool/result per tool/call."""

import pytest

from codemode import CodeMode, Session, events
from codemode.fixtures.toolset import builtin_tools
from codemode.sandbox import SandboxLimits


@pytest.fixture(params=["session.jsonl", "session.db"])
def session(tmp_path, request):
    s = Session(tools=builtin_tools(), log=str(tmp_path / request.param))
    # the run's own defences, unchecked: a program can always hide a wrong call from the
    # type check (a value made at run time), so these must hold without it
    CodeMode(s, limits=SandboxLimits(wall_clock_s=3.0, memory_bytes=64 << 20),
             type_check="off")
    yield s
    s.log.close()


def assert_log_balanced(session):
    log = session.log.read()
    calls = [e.call_id for e in log if isinstance(e, events.ToolCall)]
    results = [e.call_id for e in log if isinstance(e, events.ToolResult)]
    assert sorted(calls) == sorted(results) and len(set(results)) == len(results)
    starts = [e.sub_call_id for e in log if isinstance(e, events.CodeDispatchStart)]
    settles = [e.sub_call_id for e in log if isinstance(e, events.CodeDispatch)]
    assert starts == settles


HOSTILE = [
    ("syntax error", "def f(:\n    pass", "code run failed (exception): invalid syntax"),
    ("exception", "raise ValueError('bad input')", "code run failed (exception): bad input"),
    ("infinite loop", "while True:\n    pass",
     "code run failed (timeout): the run exceeded its wall-clock limit of 3.0 s"),
    ("memory bomb", "s = 'x' * 10**6\nwhile True:\n    s += s",
     "code run failed (memory): the program ran out of its memory limit of "
     f"{64 << 20} bytes (64 MiB)"),
    ("huge program", "x = 1\n" + "#" * 2_000_000,
     "code run failed (size): the program is 2000006 bytes, over its limit of 1048576 bytes"),
    ("deep recursion", "def f(n):\n    return f(n + 1)\nf(0)",
     "code run failed (exception): maximum recursion depth exceeded"),
    ("sys.exit", "import sys\nsys.exit(2)",
     "code run failed (exception): the program called sys.exit(2)"),
    ("os process functions", "import os\nos.fork()",
     "code run failed (exception): module 'os' has no attribute 'fork'"),
    ("socket", "import socket\nsocket.create_connection(('127.0.0.1', 80))",
     "code run failed (exception): No module named 'socket' (not available in the sandbox)"),
]


@pytest.mark.slow
@pytest.mark.parametrize("label, code, message", HOSTILE, ids=[h[0] for h in HOSTILE])
async def test_hostile_program_gives_a_typed_failure(session, label, code, message):
    result = await session.call("run_code", {"code": code})
    assert result.is_error
    assert result.error.info.code == "CODE_RUN_FAILED"
    assert result.error.message.startswith(message)
    assert_log_balanced(session)
    after = await session.call("run_code", {"code": "1 + 1"})   # the host is fine
    assert after.value["result"] == 2


async def test_unknown_tool_is_tool_not_found(session):
    code = ("try:\n    call_tool('drop_database')\nexcept ToolNotFound as e:\n"
            "    r = [e.code, e.message]\nr")
    result = await session.call("run_code", {"code": code})
    assert result.value["result"] == ["UNKNOWN_TOOL", 'unknown tool "drop_database"']
    [settled] = [e for e in session.log.read() if isinstance(e, events.CodeDispatch)]
    assert settled.is_error and settled.name == "drop_database"
    assert_log_balanced(session)


async def test_schema_invalid_arguments_are_a_tool_argument_error_naming_the_field(session):
    code = ("try:\n    add(a='one', b=2)\nexcept ToolArgumentError as e:\n"
            "    r = [e.code, e.message]\nr")
    result = await session.call("run_code", {"code": code})
    code_, message = result.value["result"]
    assert code_ == "INVALID_ARGS"
    assert message.startswith("invalid arguments: ")
    assert '"a"' in message
    assert_log_balanced(session)


async def test_non_json_arguments_fail_in_the_guest_and_dispatch_nothing(session):
    code = "get_weather(city={'Paris'})"
    result = await session.call("run_code", {"code": code})
    assert result.is_error
    assert "TypeError: get_weather(): arguments['city'] is a set, which is not a JSON value" \
        in result.error.message
    assert not [e for e in session.log.read() if isinstance(e, events.CodeDispatchStart)]
    assert_log_balanced(session)


async def test_tool_error_reaches_the_program_and_the_log(session):
    code = "try:\n    fail(message='nope')\nexcept ToolError as e:\n    r = e.message\nr"
    result = await session.call("run_code", {"code": code})
    assert result.value["result"] == "nope"
    [settled] = [e for e in session.log.read() if isinstance(e, events.CodeDispatch)]
    assert settled.is_error
    assert settled.content == ({"type": "text", "text": "Error: nope"},)


async def test_catching_a_rejection_does_not_make_the_call_succeed(session):
    code = ("for i in range(3):\n    try:\n        fail(message=f'no {i}')\n"
            "    except ToolCallError:\n        pass\n'swallowed'")
    result = await session.call("run_code", {"code": code})
    assert result.value["result"] == "swallowed"
    assert result.value["subcalls"]["failed"] == 3
    settled = [e for e in session.log.read() if isinstance(e, events.CodeDispatch)]
    assert [e.is_error for e in settled] == [True, True, True]


async def test_forged_parent_token_fields_are_ignored(session):
    # A program can reach the raw bridge; whatever it claims, the host mints the token.
    code = ("import sys\nhost = sys.modules['wit_world.imports.host']\n"
            "host.dispatch('{\"calls\":[{\"id\":1,\"name\":\"add\",\"args\":{\"a\":1,\"b\":2},"
            "\"root_call_id\":\"forged\",\"parent_call_id\":\"forged\"}],\"until\":[1]}')")
    result = await session.call("run_code", {"code": code})
    assert not result.is_error, result.text
    [start] = [e for e in session.log.read() if isinstance(e, events.CodeDispatchStart)]
    [call] = [e for e in session.log.read() if isinstance(e, events.ToolCall)]
    assert start.root_call_id == call.call_id
    assert start.parent_call_id == call.call_id
    assert start.sub_call_id == f"{call.call_id}:code:1"


async def test_parent_token_fields_as_arguments_are_refused_and_logged(session):
    # Only the host mints the parent token; arguments named like its fields never reach a tool.
    code = ("import sys, json\nhost = sys.modules['wit_world.imports.host']\n"
            "json.loads(host.dispatch('{\"calls\":[{\"id\":1,\"name\":\"add\",\"args\":"
            "{\"a\":1,\"b\":2,\"parent_call_id\":\"forged\",\"subCallId\":\"x\"}}],"
            "\"until\":[1]}'))['results']")
    result = await session.call("run_code", {"code": code})
    assert result.value["result"] == [{
        "id": 1, "ok": False, "code": "INVALID_ARGS",
        "message": 'invalid arguments: "parent_call_id" is reserved for the host (it sets the '
                   "parent token of every sub-call)"}]
    [settled] = [e for e in session.log.read() if isinstance(e, events.CodeDispatch)]
    assert settled.is_error and settled.name == "add"
    assert_log_balanced(session)


@pytest.mark.slow
@pytest.mark.parametrize("code", ["stuck()", "await stuck()",
                                  "import asyncio\nawait asyncio.gather(stuck(), stuck())"])
async def test_a_tool_that_ignores_the_abort_cannot_hold_the_run(tmp_path, code):
    import asyncio
    import time

    from codemode import tool

    @tool(concurrency_safe=True)
    async def stuck() -> int:
        """Never finishes and ignores cancellation of its signal."""
        await asyncio.sleep(1000)
        return 0

    s = Session(tools=[stuck], log=str(tmp_path / "session.jsonl"))
    CodeMode(s, limits=SandboxLimits(wall_clock_s=0.5))
    started = time.monotonic()
    result = await s.call("run_code", {"code": code})
    assert time.monotonic() - started < 5.0    # 0.5 s run + 1 s grace, with a margin
    assert result.error.message.startswith("code run failed (timeout)")
    settled = [e for e in s.log.read() if isinstance(e, events.CodeDispatch)]
    assert settled and all(e.is_error and e.code == "TOOL_OUTCOME_UNKNOWN" for e in settled)
    assert settled[0].content == ({"type": "text", "text": "Error: tool call abandoned: it did "
                                   "not stop within 1 s of the run's end, so its outcome is "
                                   "unknown; it may or may not have taken effect — check the "
                                   "current state before retrying"},)
    assert_log_balanced(s)


@pytest.mark.slow
async def test_a_tool_that_swallows_cancellation_cannot_hold_the_run(tmp_path):
    import asyncio
    import time

    from codemode import tool

    released = []

    @tool(concurrency_safe=True)
    async def stubborn() -> int:
        """Catches every cancellation and keeps waiting (until the test releases it)."""
        while True:
            try:
                await asyncio.sleep(1000)
            except asyncio.CancelledError:
                if released:
                    raise

    s = Session(tools=[stubborn], log=str(tmp_path / "session.jsonl"))
    CodeMode(s, limits=SandboxLimits(wall_clock_s=0.5))
    started = time.monotonic()
    result = await s.call("run_code", {"code": "stubborn()"})
    released.append(True)                 # let the abandoned body end with the test's loop
    assert time.monotonic() - started < 5.0    # 0.5 s run + 1 s grace, with a margin
    assert result.error.message.startswith("code run failed (timeout)")
    assert_log_balanced(s)


@pytest.mark.slow
async def test_a_finished_call_waiting_behind_a_stuck_one_commits_through_the_pipeline(tmp_path):
    import asyncio

    from codemode import tool

    done = []

    @tool(concurrency_safe=True)
    async def stuck() -> int:
        """Ignores the abort."""
        await asyncio.sleep(1000)
        return 0

    @tool(concurrency_safe=True)
    async def transfer(amount: int) -> int:
        """A side effect that completes at once."""
        done.append(amount)
        return amount

    s = Session(tools=[stuck, transfer], log=str(tmp_path / "session.jsonl"))
    CodeMode(s, limits=SandboxLimits(wall_clock_s=5.0))
    code = ("import asyncio\nslow = asyncio.ensure_future(stuck())\n"
            "try:\n    await asyncio.wait_for(transfer(amount=100), 0.2)\n"
            "except TimeoutError:\n    pass\n'finished'")
    result = await s.call("run_code", {"code": code})
    assert done == [100]
    settled = {e.name: e for e in s.log.read() if isinstance(e, events.CodeDispatch)}
    # The body ran; its commit came after the run scope was aborted, so the pipeline
    # reports it the way docs/pipeline-spec.md §6 says (a late success becomes ABORTED), not as
    # abandoned like the call that never stopped.
    assert settled["transfer"].content == ({"type": "text", "text": "Error: tool call aborted"},)
    assert settled["stuck"].content[0]["text"].startswith("Error: tool call abandoned")
    assert_log_balanced(s)
    assert result.is_error is False or "timeout" in result.error.message
