"""Every sub-call has exactly one governed, recorded outcome that nobody can misread
(docs/pipeline-spec.md §5, §10, §11.4): what a program sees, what the log keeps, what policy saw."""

import sys

import pytest

from codemode import CodeMode, Session, events, tool
from codemode.pipeline.hooks import python_hook


@tool(concurrency_safe=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def quits(status: int = 2) -> None:
    """Calls sys.exit, as argparse does on bad input."""
    sys.exit(status)


@pytest.fixture
def session(tmp_path):
    s = Session(tools=[add, quits], log=str(tmp_path / "session.jsonl"))
    # These programs make wrong calls on purpose: what they meet is the check at run time
    # (a program the type check would refuse before the run reaches it when unchecked).
    CodeMode(s, type_check="off")
    yield s
    s.close()


def of(session, kind):
    return [e for e in session.log.read() if isinstance(e, kind)]


async def run(session, code, **kwargs):
    return await session.call("run_code", {"code": code}, **kwargs)


CATCH = (
    "try:\n    {call}\nexcept ToolCallError as e:\n    r = [type(e).__name__, e.code, e.message]\nr"
)


async def test_a_sub_call_body_raising_system_exit_is_a_rejection_not_an_exit(session):
    result = await run(session, CATCH.format(call="quits()") + "\n[r, add(a=1, b=2)]")
    assert not result.is_error, result.text
    rejection, after = result.value["result"]
    assert rejection == ["ToolError", "TOOL_EXITED", 'tool "quits" raised SystemExit(2)']
    assert after == 3
    starts, settles = of(session, events.CodeDispatchStart), of(session, events.CodeDispatch)
    assert [e.name for e in starts] == [e.name for e in settles] == ["quits", "add"]
    assert settles[0].is_error and not settles[1].is_error
    assert len(of(session, events.ToolCall)) == len(of(session, events.ToolResult)) == 1


async def test_a_raising_python_hook_is_hook_failed_in_the_program_not_a_tool_error(session):
    ran = []

    @tool(concurrency_safe=True)
    def side_effect() -> str:
        """Records that it ran."""
        ran.append(1)
        return "ran"

    session.register(side_effect)

    def broken(execution):
        raise RuntimeError("policy service is down")

    python_hook(session, "tools/pre-execute", broken, matcher="side_effect", handler_id="policy")
    result = await run(session, CATCH.format(call="side_effect()"))
    assert result.value["result"] == [
        "ToolCallError",
        "HOOK_FAILED",
        'hook "policy" failed: RuntimeError: policy service is down',
    ]
    assert ran == []


# ---- no bypass --------------------------------------------------------------------------


@tool
def drop_database(name: str) -> str:
    """Registered on the session, never exposed to programs."""
    raise AssertionError("must never run")


async def test_a_name_not_exposed_meets_policy_and_the_finalizer_stage_like_a_native_call(tmp_path):
    s = Session(tools=[add, drop_database], log=str(tmp_path / "s.jsonl"))
    CodeMode(s, expose=["add"])
    judged, guarded, published = [], [], []

    async def policy(execution, next):
        judged.append((execution.name, execution.parent is not None))
        return await next()

    s.on("tools/pre-execute", policy)
    s.guard(lambda execution: guarded.append(execution.name))
    s.on(
        "tools/result",
        lambda execution, result: published.append(
            (execution.name, result.error.code if result.is_error else None)
        ),
    )
    code = CATCH.format(call="call_tool('drop_database', name='prod')")
    result = await run(s, code)
    assert result.value["result"] == [
        "ToolNotFound",
        "UNKNOWN_TOOL",
        'unknown tool "drop_database"',
    ]
    assert ("drop_database", True) in judged and "drop_database" in guarded
    assert ("drop_database", "UNKNOWN_TOOL") in published
    [start], [settle] = of(s, events.CodeDispatchStart), of(s, events.CodeDispatch)
    assert (start.name, start.arguments, settle.is_error) == (
        "drop_database",
        {"name": "prod"},
        True,
    )
    native = await s.call("drop_database", {"name": "prod"})  # the same name, natively:
    assert ("drop_database", False) in judged and native.is_error  # policy sees it too
    s.close()


async def test_an_unknown_name_suggests_the_closest_names_the_run_may_call(session):
    result = await run(session, CATCH.format(call="call_tool('qits', status=1)"))
    assert result.value["result"] == [
        "ToolNotFound", "UNKNOWN_TOOL", 'unknown tool "qits"; did you mean "quits"?']
    typo = await run(session, "ad(a=1, b=2)")         # a plain name: Python's own NameError
    assert "NameError" in typo.text


async def test_the_suggestion_never_names_a_tool_hidden_from_the_run(tmp_path):
    s = Session(tools=[add, drop_database], log=str(tmp_path / "s.jsonl"))
    CodeMode(s, expose=["add"])
    for name in ("drop_databse", "drop_database"):
        result = await run(s, CATCH.format(call=f"call_tool({name!r}, name='prod')"))
        [kind, code, message] = result.value["result"]
        assert (kind, code, message) == ("ToolNotFound", "UNKNOWN_TOOL", f'unknown tool "{name}"')
    near_add = await run(s, CATCH.format(call="call_tool('ddd', a=1, b=2)"))
    assert near_add.value["result"][2] == 'unknown tool "ddd"; did you mean "add"?'
    s.close()


async def test_a_policy_denial_of_an_unexposed_name_reaches_the_program_as_a_denial(session):
    from codemode import Deny

    session.on(
        "tools/pre-execute",
        lambda execution, next: Deny("no such thing here") if execution.name == "nope" else next(),
    )
    result = await run(session, CATCH.format(call="call_tool('nope')"))
    assert result.value["result"] == ["ToolDenied", "DENIED", "no such thing here"]


@tool(strict=True)
def closed(a: int) -> int:
    """A closed schema: no extra keys."""
    raise AssertionError("must never run")


@pytest.mark.parametrize(
    "call, problem",
    [
        ("closed(a=1, b=2)", "closed() got an unexpected keyword argument 'b'"),
        ("closed()", "closed() missing 1 required positional argument: 'a'"),
        ("closed(1, 2)", "closed() takes 1 positional argument but 2 were given"),
        ("closed(1, a=2)", "closed() got multiple values for argument 'a'"),
    ],
)
async def test_a_call_of_the_wrong_shape_is_a_recorded_tool_argument_error(session, call, problem):
    session.register(closed)
    judged = []

    async def policy(execution, next):
        judged.append(execution.name)
        return await next()

    session.on("tools/pre-execute", policy)
    code = (
        f"try:\n    {call}\nexcept TypeError as e:\n"
        "    r = [type(e).__name__, isinstance(e, ToolCallError), e.code, e.message]\nr"
    )
    result = await run(session, code)
    assert result.value["result"] == [
        "ToolArgumentError",
        True,
        "INVALID_ARGS",
        f"invalid arguments: {problem}",
    ]
    assert judged == ["run_code"]               # refused before policy: it cannot run
    [start], [settle] = of(session, events.CodeDispatchStart), of(session, events.CodeDispatch)
    assert start.name == "closed" and settle.is_error


async def test_arguments_that_are_not_json_are_still_refused_in_the_program(session):
    code = "try:\n    add(a={1}, b=2)\nexcept TypeError as e:\n    r = type(e).__name__\nr"
    result = await run(session, code)
    assert result.value["result"] == "TypeError"
    assert of(session, events.CodeDispatchStart) == []


async def test_a_listener_writing_through_a_sub_call_s_arguments_fails_it(session):
    async def sneaky(execution, next):
        if execution.name == "add":
            dict.__setitem__(execution.arguments, "a", 1000)
        return await next()

    session.on("tools/pre-execute", sneaky)
    result = await run(session, CATCH.format(call="add(a=1, b=2)"))
    assert result.value["result"][:2] == ["ToolCallError", "HOOK_FAILED"]
    [start] = of(session, events.CodeDispatchStart)
    assert start.arguments == {"a": 1, "b": 2}


async def test_a_hook_asking_to_rewrite_a_sub_call_s_input_denies_it(session):
    python_hook(
        session,
        "tools/pre-execute",
        lambda execution: {
            "hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"a": 0, "b": 0}}
        },
        matcher="add",
        handler_id="sanitiser",
    )
    result = await run(session, CATCH.format(call="add(a=1, b=2)"))
    kind, code, message = result.value["result"]
    assert (kind, code) == ("ToolDenied", "DENIED")
    assert message.startswith('hook "sanitiser" asked to rewrite the tool input (updatedInput)')


async def test_a_binding_called_after_the_abort_is_refused_before_it_is_numbered():
    import asyncio

    import msgspec

    from codemode.sandbox import SubCall, SubCallBatch, SubCallErr, SubCallReply

    replies = []

    class LateCaller:
        def run(self, request, dispatch, cancel=None):
            cancel.wait(5)  # the outer call was aborted
            replies.append(dispatch(SubCallBatch(calls=(SubCall(
                id=1, name="add", args=msgspec.Raw(b'{"a":1,"b":2}'), arguments={"a": 1, "b": 2}),
            ))))
            from codemode.sandbox import RunOutcome
            from codemode.sandbox._protocol import RunAborted

            return RunOutcome(status="error", error=RunAborted(message="aborted"))

    from codemode import Signal

    s = Session(tools=[add])
    CodeMode(s, sandbox=LateCaller())
    signal = Signal()
    asyncio.get_running_loop().call_later(0.1, signal.abort, "stop")
    result = await s.call("run_code", {"code": "add(a=1, b=2)"}, signal=signal)
    assert result.is_error
    assert replies == [
        SubCallReply(
            results=(
                SubCallErr(id=1, code="ABORTED", message="run is over; not dispatched"),
            )
        )
    ]
    assert of(s, events.CodeDispatchStart) == []


# ---- outcomes nobody can misread ------------------------------------------------------------


@pytest.mark.slow
async def test_a_sub_call_abandoned_after_its_run_is_outcome_unknown_through_the_pipeline(tmp_path):
    import asyncio

    landed, finalized, published = [], [], []
    released = asyncio.Event()  # set once the run has ended: the body outlives it, always
    asyncio.get_running_loop().call_later(60, released.set)  # a run awaiting it fails, not hangs

    def finalize(execution, result):
        finalized.append((result.is_error, result.error.code if result.error else None))
        return None

    @tool(concurrency_safe=True, finalize_content=finalize)
    async def stubborn() -> str:
        """Ignores the abort and writes once released (a side effect that lands late)."""
        await released.wait()
        landed.append("written")
        return "done"

    s = Session(tools=[stubborn], log=str(tmp_path / "s.jsonl"))
    CodeMode(s)
    s.on(
        "tools/result",
        lambda execution, result: published.append(
            (execution.name, result.error.code if result.is_error else None)
        ),
    )
    code = "import asyncio\nt = asyncio.create_task(stubborn())\nawait asyncio.sleep(0.05)\n'left'"
    result = await run(s, code)
    assert result.value["result"] == "left"
    assert result.value["subcalls"] == {
        "total": 1,
        "failed": 1,
        "denied": 0,
        "by_tool": {"stubborn": 1},
    }
    [settle] = of(s, events.CodeDispatch)
    assert (settle.is_error, settle.code) == (True, "TOOL_OUTCOME_UNKNOWN")
    assert settle.content[0]["text"].startswith(
        "Error: tool call abandoned: it did not stop within 1 s of the run's end, so its "
        "outcome is unknown; it may or may not have taken effect"
    )
    assert finalized == [(True, "TOOL_OUTCOME_UNKNOWN")]
    assert ("stubborn", "TOOL_OUTCOME_UNKNOWN") in published
    assert landed == []
    released.set()
    for _ in range(200):  # the body is left to finish on its own
        if landed:
            break
        await asyncio.sleep(0.05)
    assert landed == ["written"]
    await asyncio.sleep(0.05)
    assert finalized == [(True, "TOOL_OUTCOME_UNKNOWN")]  # its late result is discarded
    assert [p for p in published if p[0] == "stubborn"] == [("stubborn", "TOOL_OUTCOME_UNKNOWN")]
    s.close()


@pytest.mark.slow
async def test_a_sub_call_stuck_in_policy_is_abandoned_through_the_pipeline_too(tmp_path):
    import asyncio

    published = []
    released = asyncio.Event()  # set once the run has ended: the hook outlives it, always
    asyncio.get_running_loop().call_later(60, released.set)  # a run awaiting it fails, not hangs
    s = Session(tools=[add], log=str(tmp_path / "s.jsonl"))
    CodeMode(s)

    async def stuck(execution, next):
        if execution.name == "add":
            await released.wait()  # ignores the abort
        return await next()

    s.on("tools/pre-execute", stuck)
    s.on(
        "tools/result",
        lambda execution, result: published.append(
            (execution.name, result.error.code if result.is_error else None)
        ),
    )
    code = (
        "import asyncio\nt = asyncio.create_task(add(a=1, b=2))\nawait asyncio.sleep(0.05)\n'left'"
    )
    assert (await run(s, code)).value["result"] == "left"
    [settle] = of(s, events.CodeDispatch)
    assert settle.code == "TOOL_OUTCOME_UNKNOWN"
    assert ("add", "TOOL_OUTCOME_UNKNOWN") in published
    released.set()
    s.close()


async def test_dispatch_events_say_why_a_sub_call_failed(session):
    from codemode import Deny

    session.on(
        "tools/pre-execute",
        lambda execution, next: (
            Deny("no adding")
            if execution.name == "add" and execution.arguments.get("a") == 0
            else next()
        ),
    )
    python_hook(
        session,
        "tools/pre-execute",
        lambda execution: (
            (_ for _ in ()).throw(RuntimeError("broken"))
            if execution.arguments.get("a") == 9
            else None
        ),
        matcher="add",
    )

    @tool
    def boom() -> None:
        """Raises."""
        raise ValueError("bang")

    session.register(boom)
    calls = [
        "add(a=0, b=1)",
        "boom()",
        "call_tool('nope')",
        "add(a='x', b=1)",
        "add(a=9, b=1)",
        "quits()",
        "add(a=1, b=1)",
    ]
    code = "\n".join(f"try:\n    {c}\nexcept ToolCallError:\n    pass" for c in calls)
    result = await run(session, code)
    assert not result.is_error, result.text
    settles = of(session, events.CodeDispatch)
    import msgspec

    assert [e.code for e in settles] == [
        "DENIED",
        "TOOL_ERROR",
        "UNKNOWN_TOOL",
        "INVALID_ARGS",
        "HOOK_FAILED",
        "TOOL_EXITED",
        msgspec.UNSET,
    ]
    assert result.value["subcalls"]["denied"] == 1


@pytest.mark.parametrize(
    "code, value, text",
    [
        ("None", None, "(the program completed with no output; its last expression was None)"),
        ("print('x')", None, "x"),
        (
            "{}.get('k')",
            None,
            "(the program completed with no output; its last expression was None)",
        ),
        ("x = None", "absent", "(the program completed with no output)"),
        ("[None]", [None], "[\n  null\n]"),
    ],
)
async def test_a_final_expression_of_none_keeps_result_null(session, code, value, text):
    result = await run(session, code)
    if value == "absent":
        assert "result" not in result.value
    else:
        assert "result" in result.value and result.value["result"] == value
    assert result.text == text


CRASHING_HOST = """
import asyncio, pathlib, sys
from codemode import CodeMode, Session, tool

marker = pathlib.Path(sys.argv[2])

@tool
async def hang() -> str:
    '''Signals that it runs, then never returns.'''
    marker.write_text("running")
    await asyncio.sleep(600)
    return "never"

async def main():
    session = Session(tools=[hang], log=sys.argv[1])
    CodeMode(session)
    await session.call("run_code", {"code": "hang()"})

asyncio.run(main())
"""


@pytest.mark.parametrize("name", ["session.jsonl", "session.db"])
def test_kill_9_while_a_sub_call_runs_settles_it_on_reopen(tmp_path, name):
    import os
    import signal
    import subprocess
    import time

    from codemode import open_log

    log_path, marker = tmp_path / name, tmp_path / "marker"
    script = tmp_path / "host.py"
    script.write_text(CRASHING_HOST)
    process = subprocess.Popen(
        [sys.executable, str(script), str(log_path), str(marker)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert process.poll() is None, process.stderr.read().decode()
            assert time.monotonic() < deadline, "the host never started the sub-call"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)
        process.stdout.close()
        process.stderr.close()
    with open_log(log_path) as log:
        repaired = log.repaired
        kinds = [type(e).__name__ for e in log.read()]
    assert [type(e).__name__ for e in repaired] == [
        "CodeDispatch",
        "ToolResult",
        "StepEnd",
        "TurnEnd",
    ]
    settle, result = repaired[:2]
    assert (settle.name, settle.code, settle.is_error) == ("hang", "TOOL_OUTCOME_UNKNOWN", True)
    assert result.error.code == "TOOL_OUTCOME_UNKNOWN"
    assert kinds.count("CodeDispatchStart") == kinds.count("CodeDispatch") == 1


# ---- dispatch events only inside a turn ------------------------------------------------------


async def test_a_run_outside_any_turn_governs_its_sub_calls_but_writes_no_dispatch_events(session):
    from codemode import ExecutionInput, Signal
    from codemode.pipeline.log import check

    published = []
    session.on("tools/result", lambda execution, result: published.append(execution.name))
    result = await session.execute(
        ExecutionInput(
            call_id="direct", name="run_code", arguments={"code": "add(a=1, b=2)"}, signal=Signal()
        )
    )
    assert result.value["result"] == 3
    assert published == ["add", "run_code"]
    assert of(session, events.CodeDispatchStart) == of(session, events.CodeDispatch) == []
    async with session.turn():  # the same, inside a turn: recorded
        await session.execute(
            ExecutionInput(
                call_id="in-turn",
                name="run_code",
                arguments={"code": "add(a=1, b=2)"},
                signal=Signal(),
            )
        )
    [start], [settle] = of(session, events.CodeDispatchStart), of(session, events.CodeDispatch)
    assert start.root_call_id == settle.root_call_id == "in-turn"
    assert check(session.log.read()) == []
