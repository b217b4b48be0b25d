"""Code mode through the real pipeline and the real wasm sandbox (docs/pipeline-spec.md §11,
§14.2)."""

import asyncio
import time

import msgspec
import pytest

from codemode import (
    Accept,
    Block,
    CodeMode,
    Deny,
    ExecutionToken,
    RunContext,
    Session,
    Signal,
    events,
    tool,
)
from codemode.sandbox import RunOutcome, SandboxUnavailable, SubCall, SubCallBatch


@tool(concurrency_safe=True)
async def slow(ctx: RunContext, ms: int = 200) -> int:
    """Sleep `ms` milliseconds on the host; stop early when aborted."""
    aborted = asyncio.ensure_future(ctx.signal.wait())
    try:
        await asyncio.wait([aborted], timeout=ms / 1000)
    finally:
        aborted.cancel()
    return ms


@tool
async def exclusive(ctx: RunContext, ms: int = 100) -> int:
    """Not concurrency-safe: runs alone."""
    await asyncio.sleep(ms / 1000)
    return ms


@tool(concurrency_safe=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(concurrency_safe=True)
def with_context(ctx: RunContext, text: str) -> str:
    """Defers a context message to after the result."""
    ctx.defer_context(f"note: {text}")
    return text


@tool(concurrency_safe=True)
def finisher(ctx: RunContext) -> str:
    """Concludes the turn."""
    ctx.conclude_turn()
    return "done"


@tool(concurrency_safe=True)
def fail(message: str) -> None:
    """Always raises."""
    raise RuntimeError(message)


TOOLS = [slow, exclusive, add, with_context, finisher, fail]


@pytest.fixture
def session(tmp_path):
    s = Session(tools=TOOLS, log=str(tmp_path / "session.jsonl"))
    s.code = CodeMode(s)
    yield s
    s.log.close()


def of(session, kind):
    return [e for e in session.log.read() if isinstance(e, kind)]


async def run(session, code, **kwargs):
    return await session.call("run_code", {"code": code}, **kwargs)


# ---- mode wiring -----------------------------------------------------------------------

async def test_native_mode_needs_no_runtime():
    s = Session(tools=[add])
    result = await s.call("add", {"a": 1, "b": 2})
    assert result.value == 3
    assert [t["name"] for t in s.model_tools()] == ["add"]


def test_code_mode_offers_only_run_code_and_states_the_rule_before_the_tools():
    s = Session(tools=[add], mode="code")
    mode = CodeMode(s)
    assert [t["name"] for t in s.model_tools()] == ["run_code"]
    text = mode.description()
    assert text.index("Only `run_code` may be called directly") < text.index("def add(")


def test_both_mode_omits_the_rule():
    s = Session(tools=[add], mode="both")
    mode = CodeMode(s)
    assert [t["name"] for t in s.model_tools()] == ["add", "run_code"]
    assert "Only `run_code` may be called directly" not in mode.description()


def test_the_description_says_only_concurrency_safe_tools_overlap():
    text = " ".join(CodeMode(Session(tools=TOOLS)).description().split())
    assert "`asyncio.gather` run concurrently" not in text
    assert ("calls gathered with `asyncio.gather` go out together, and run concurrently only "
            "for tools marked concurrency-safe (others run one at a time)") in text


def _line(text, prefix):
    [line] = [line for line in text.splitlines() if line.startswith(prefix)]
    return line


def _packages(text):
    """The modules the description's module paragraph names, and how many more it counts."""
    listed = _line(text, "Modules to import: ").split(": ", 1)[1].split("; ", 1)[0]
    names, _, more = listed.partition(" and ")
    return names.split(", "), int(more.split()[0]) if more else 0


def _named(allowed):
    """What the paragraph should name of `allowed`: the likely imports, and how many
    top-level packages it leaves unnamed."""
    likely = ["json", "re", "datetime", "zoneinfo", "time", "math", "statistics", "decimal",
              "fractions", "random", "collections", "itertools", "functools", "operator",
              "heapq", "bisect", "asyncio", "typing", "dataclasses", "enum", "string",
              "textwrap", "difflib", "unicodedata", "html", "csv", "base64", "hashlib", "uuid",
              "urllib.parse", "ipaddress", "copy", "pprint", "calendar"]
    named = [m for m in likely if m in allowed]
    tops = {m.partition(".")[0] for m in allowed} - {m.partition(".")[0] for m in named}
    return named, len(tops)


def test_the_description_lists_the_importable_modules_and_the_limits_inline():
    from codemode.sandbox import SandboxLimits, WasmSandbox

    limits = SandboxLimits(wall_clock_s=2.5, memory_bytes=64 << 20, output_bytes=65536,
                           max_subcalls=7, request_bytes=1000, fuel=5000)
    text = CodeMode(Session(tools=[add]), limits=limits).description()
    assert _packages(text) == _named(WasmSandbox.allowed_modules)
    named, more = _packages(text)
    assert named[:6] == ["json", "re", "datetime", "zoneinfo", "time", "math"] and more > 50
    # What a program is unlikely to import stays importable, but unnamed.
    assert {"pdb", "bdb", "dis", "gc", "tracemalloc", "cProfile", "__future__"}.isdisjoint(named)
    assert "bdb" in WasmSandbox.allowed_modules
    assert _line(text, "Each run may use at most") == (
        "Each run may use at most 2.5 s of wall-clock time (sleeps and tool calls count); "
        "64 MiB of memory; 16 MiB each of printed output and of error output (you are "
        "shown the first 64 KiB of each, and of the final value's JSON; the run still "
        "succeeds); 7 tool calls; "
        "1000 bytes of JSON arguments per tool call; 5000 units of fuel (about one per "
        "instruction). Past a limit the run stops and fails.")
    assert "docs/" not in text and ".md" not in text


def test_the_description_lists_the_modules_of_the_sandbox_in_use():
    from codemode.sandbox import RestrictedSandbox

    text = CodeMode(Session(tools=[add]), sandbox=RestrictedSandbox()).description()
    assert _packages(text) == _named(RestrictedSandbox.allowed_modules)
    assert "zoneinfo" not in _packages(text)[0]          # not on the restricted tier's list


def test_sdk_text_is_byte_identical_across_assemblies():
    first = CodeMode(Session(tools=TOOLS)).description()
    second = CodeMode(Session(tools=list(reversed(TOOLS)))).description()
    assert first == second


def test_description_follows_tool_changes():
    s = Session(tools=[add])
    mode = CodeMode(s)
    dispose = s.register(fail)
    assert "def fail(" in mode.definition.description
    dispose()
    assert "def fail(" not in mode.definition.description


async def test_run_code_is_never_a_binding(session):
    result = await run(session, "'run_code' in globals()")
    assert result.value["result"] is False
    result = await run(session, "call_tool('run_code', code='1')")
    assert result.is_error
    assert 'unknown tool "run_code"' in result.text


async def test_model_direct_call_under_code_mode_is_unknown_tool():
    s = Session(tools=[add], mode="code")
    CodeMode(s)
    result = await s.call("add", {"a": 1, "b": 2})
    assert result.error.info.code == "UNKNOWN_TOOL"
    assert result.error.message == ("only `run_code` is callable directly — "
                                    "call `add` inside a program")
    inside = await s.call("run_code", {"code": "add(a=1, b=2)"})
    assert inside.value["result"] == 3


async def test_missing_runtime_is_a_failure_not_a_crash():
    class Missing:
        def run(self, request, dispatch, cancel=None) -> RunOutcome:
            raise SandboxUnavailable("componentize-py is not installed")

    s = Session(tools=[add])
    CodeMode(s, sandbox=Missing())
    result = await s.call("run_code", {"code": "1"})
    assert result.error.info.code == "CODE_RUN_FAILED"
    assert result.error.message == "code run failed (runtime): componentize-py is not installed"


# ---- scheduler -------------------------------------------------------------------------

async def test_an_exclusive_call_bars_overlap(session):
    code = "import asyncio\nawait asyncio.gather(*(exclusive(ms=150) for _ in range(3)))"
    started = time.perf_counter()
    result = await run(session, code)
    assert not result.is_error, result.text
    assert time.perf_counter() - started >= 0.45
    starts = of(session, events.CodeDispatchStart)
    settles = of(session, events.CodeDispatch)
    # each start comes after the previous call settled: no overlap
    for previous, start in zip(settles, starts[1:], strict=False):
        assert previous.seq < start.seq


async def test_commits_stay_in_submission_order_under_out_of_order_completion(session):
    code = ("import asyncio\n"
            "await asyncio.gather(slow(ms=300), slow(ms=10), slow(ms=100))")
    result = await run(session, code)
    assert result.value["result"] == [300, 10, 100]
    settles = of(session, events.CodeDispatch)
    assert [e.sub_call_id.rsplit(":", 1)[1] for e in settles] == ["1", "2", "3"]


async def test_a_slow_pre_execute_delays_the_next_start(session):
    async def slow_policy(execution, next):
        if execution.arguments.get("ms") == 300:
            await asyncio.sleep(0.2)
        return await next()

    session.on("tools/pre-execute", slow_policy)
    code = "import asyncio\nawait asyncio.gather(slow(ms=300), slow(ms=10))"
    result = await run(session, code)
    assert not result.is_error
    first, second = of(session, events.CodeDispatchStart)
    assert second.time - first.time >= 0.19


async def test_every_dispatch_event_lands_before_the_outer_result(session):
    code = "import asyncio\nawait asyncio.gather(*(slow(ms=50) for _ in range(5)))"
    await run(session, code)
    log = session.log.read()
    [outer] = [e for e in log if isinstance(e, events.ToolResult)]
    assert all(e.seq < outer.seq for e in log
               if isinstance(e, (events.CodeDispatchStart, events.CodeDispatch)))


async def test_an_abandoned_queued_call_logs_no_start_event(tmp_path):
    from codemode.sandbox import SandboxLimits
    s = Session(tools=TOOLS)
    CodeMode(s, limits=SandboxLimits(max_concurrent_subcalls=1))
    code = ("import asyncio\n"
            "tasks = [asyncio.create_task(slow(ms=8000)) for _ in range(3)]\n"
            "await asyncio.sleep(0.1)\n'left'")
    started = time.perf_counter()
    result = await s.call("run_code", {"code": code})
    assert result.value["result"] == "left"
    assert time.perf_counter() - started < 4.0           # the in-flight call was aborted
    assert len(of(s, events.CodeDispatchStart)) == 1
    [settled] = of(s, events.CodeDispatch)
    assert settled.is_error


async def test_tool_unregistered_after_enumeration_fails_as_unknown(session):
    dispose_holder = {}

    @tool(concurrency_safe=True)
    def remove_add() -> str:
        """Unregisters `add`."""
        dispose_holder["add"]()
        return "removed"

    s = Session(tools=[remove_add])
    dispose_holder["add"] = s.register(add)
    CodeMode(s)
    code = ("remove_add()\ntry:\n    add(a=1, b=1)\nexcept ToolNotFound as e:\n"
            "    r = e.message\nr")
    result = await s.call("run_code", {"code": code})
    assert result.value["result"] == 'unknown tool "add"'


# ---- bridge ----------------------------------------------------------------------------

async def test_program_receives_the_value_after_post_execute(session):
    async def replace(execution, result, next):
        if execution.name == "add" and not result.is_error:
            return Accept(value=result.value * 10)
        return await next()

    session.on("tools/post-execute", replace)
    result = await run(session, "add(a=1, b=2)")
    assert result.value["result"] == 30


async def test_content_replacement_is_not_visible_to_the_program(session):
    async def redact(execution, result, next):
        if execution.name == "add":
            return Accept(content=[{"type": "text", "text": "[redacted]"}])
        return await next()

    session.on("tools/post-execute", redact)
    result = await run(session, "add(a=1, b=2)")
    assert result.value["result"] == 3
    [settled] = of(session, events.CodeDispatch)
    assert settled.content == ({"type": "text", "text": "[redacted]"},)


async def test_post_execute_block_becomes_a_rejection(session):
    async def block(execution, result, next):
        if execution.name == "add":
            return Block([{"type": "text", "text": "not for programs"}])
        return await next()

    session.on("tools/post-execute", block)
    code = "try:\n    add(a=1, b=2)\nexcept ToolCallError as e:\n    r = e.message\nr"
    result = await run(session, code)
    assert result.value["result"] == "not for programs"


async def test_pre_execute_deny_reaches_the_program_with_the_reason(session):
    async def deny(execution, next):
        if execution.name == "add":
            return Deny("adding is not allowed")
        return await next()

    session.on("tools/pre-execute", deny)
    code = ("try:\n    add(a=1, b=2)\nexcept ToolDenied as e:\n"
            "    r = [e.code, e.message]\nr")
    result = await run(session, code)
    assert result.value["result"] == ["DENIED", "adding is not allowed"]
    [settled] = of(session, events.CodeDispatch)
    assert settled.is_error
    assert settled.content == ({"type": "text", "text": "Error: adding is not allowed"},)
    assert result.value["subcalls"]["denied"] == 1


async def test_a_raising_pre_execute_listener_settles_without_running_the_body(session):
    ran = []

    @tool(concurrency_safe=True)
    def side_effect() -> str:
        """Records that it ran."""
        ran.append(1)
        return "ran"

    session.register(side_effect)
    seen_post = []

    async def explode(execution, next):
        if execution.name == "side_effect":
            raise RuntimeError("listener broke")
        return await next()

    async def post(execution, result, next):
        seen_post.append(execution.name)
        return await next()

    session.on("tools/pre-execute", explode)
    session.on("tools/post-execute", post)
    code = "try:\n    side_effect()\nexcept ToolCallError as e:\n    r = e.message\nr"
    result = await run(session, code)
    assert result.value["result"] == "listener broke"
    assert ran == []
    assert "side_effect" not in seen_post
    [settled] = of(session, events.CodeDispatch)
    assert settled.is_error


async def test_guards_run_for_sub_calls_and_see_the_parent(session):
    seen = []

    def guard(execution):
        seen.append(execution.parent)
        return "guarded" if execution.name == "add" else None

    session.guard(guard)
    result = await run(session,
                       "try:\n    add(a=1, b=1)\nexcept ToolDenied as e:\n    r = e.message\nr")
    assert result.value["result"] == "guarded"
    outer_token = [p for p in seen if p is None]
    assert len(outer_token) == 1                         # the run_code call itself
    nested = [p for p in seen if p is not None]
    assert len(nested) == 1 and isinstance(nested[0], ExecutionToken)


async def test_nested_observers_see_only_an_opaque_parent_token(session):
    observed = []
    session.on("tools/result", lambda execution, result: observed.append(execution))
    await run(session, "add(a=1, b=2)")
    nested = [e for e in observed if e.name == "add"]
    outer = [e for e in observed if e.name == "run_code"]
    assert nested[0].parent is outer[0].token
    assert isinstance(nested[0].parent, ExecutionToken)


async def test_one_event_pair_per_dispatch_with_independent_equal_arguments(session):
    await run(session, "add(a=1, b=2)\nadd(a=3, b=4)")
    starts = of(session, events.CodeDispatchStart)
    settles = of(session, events.CodeDispatch)
    assert [s.arguments for s in starts] == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    assert [s.arguments for s in settles] == [s.arguments for s in starts]
    assert starts[0].arguments is not settles[0].arguments


async def test_sub_call_contexts_are_deferred_after_the_outer_result(session):
    result = await run(session, "with_context(text='a')\nwith_context(text='b')")
    assert not result.is_error
    log = session.log.read()
    [outer] = [e for e in log if isinstance(e, events.ToolResult)]
    messages = [e for e in log if isinstance(e, events.UserMessage)]
    texts = [b.get("text") for m in messages for b in m.message.content]
    assert texts == ["note: a", "note: b"]
    assert all(m.seq > outer.seq for m in messages)


async def test_sub_call_contexts_are_kept_when_the_program_later_fails(session):
    result = await run(session, "with_context(text='kept')\nraise ValueError('later')")
    assert result.is_error
    messages = of(session, events.UserMessage)
    assert [b.get("text") for m in messages for b in m.message.content] == ["note: kept"]


async def test_an_outer_block_discards_sub_call_contexts(session):
    async def block_run_code(execution, result, next):
        if execution.name == "run_code":
            return Block("blocked")
        return await next()

    session.on("tools/post-execute", block_run_code)
    await run(session, "with_context(text='dropped')")
    assert of(session, events.UserMessage) == []


async def test_a_nested_conclude_turn_is_forwarded(session):
    result = await run(session, "finisher()")
    assert result.concludes_turn is True


async def test_a_raising_dispatch_log_listener_is_contained(session):
    async def broken(execution, result, content, next):
        raise RuntimeError("log listener broke")

    session.on("tools/code-dispatch-log", broken)
    result = await run(session, "add(a=1, b=2)")
    assert result.value["result"] == 3
    [settled] = of(session, events.CodeDispatch)
    assert settled.content == ({"type": "text", "text": "3"},)


async def test_a_dispatch_log_listener_replaces_only_the_durable_copy(session):
    async def spill(execution, result, content, next):
        return [{"type": "text", "text": "[spilled]"}]

    session.on("tools/code-dispatch-log", spill)
    result = await run(session, "add(a=1, b=2)")
    assert result.value["result"] == 3
    [settled] = of(session, events.CodeDispatch)
    assert settled.content == ({"type": "text", "text": "[spilled]"},)


async def test_a_failed_run_gives_kind_message_and_captured_logs(session):
    result = await run(session, "print('before')\nraise KeyError('k')")
    assert result.error.info.code == "CODE_RUN_FAILED"
    assert result.error.message.startswith("code run failed (exception): 'k'")
    assert result.error.message.endswith("Captured output:\nbefore")


async def test_stderr_is_shown_to_the_model_on_success(session):
    result = await run(session, "import sys\nprint('out')\nprint('warn', file=sys.stderr)\n7")
    assert result.value["stderr"] == "warn\n"
    assert result.content[0]["text"] == "out\nstderr:\nwarn\n7"


async def test_long_output_keeps_head_and_tail_for_the_model_and_all_in_the_value(session):
    code = "for i in range(20_000):\n    print(f'line {i:05}')"
    result = await run(session, code)
    text = result.content[0]["text"]
    assert text.startswith("line 00000\n") and text.endswith("line 19999")
    assert "characters cut ...]" in text and len(text) < 21_000
    assert len(result.value["logs"]) == 20_000


async def test_failure_text_is_bounded_and_keeps_the_outcome(session):
    code = "print('x' * 100_000)\nraise ValueError('late')"
    result = await run(session, code)
    assert result.error.message.startswith("code run failed (exception): late")
    assert len(result.error.message) < 21_000


async def test_pre_aborted_outer_call_never_reaches_the_runtime():
    calls = []

    class Recording:
        def run(self, request, dispatch, cancel=None):
            calls.append(request)
            raise AssertionError("must not run")

    s = Session(tools=[add])
    CodeMode(s, sandbox=Recording())
    result = await s.call("run_code", {"code": "1"}, signal=Signal.aborted_with("stop"))
    assert result.error.info.code == "ABORTED_BEFORE_DISPATCH"
    assert calls == []


async def test_outer_abort_mid_run_aborts_in_flight_sub_calls(session):
    signal = Signal()
    code = "import asyncio\nawait asyncio.gather(slow(ms=8000), slow(ms=8000))"

    async def abort_soon():
        await asyncio.sleep(0.3)
        signal.abort("user pressed stop")

    started = time.perf_counter()
    _, result = await asyncio.gather(abort_soon(), run(session, code, signal=signal))
    assert time.perf_counter() - started < 4.0          # the calls would take 8 s
    assert result.is_error
    assert result.error.info.code in ("CODE_RUN_FAILED", "ABORTED")
    settles = of(session, events.CodeDispatch)
    assert all(e.is_error for e in settles)
    assert len(of(session, events.CodeDispatchStart)) == len(settles)


async def test_dispatch_events_never_become_model_messages(session):
    await run(session, "add(a=1, b=2)")
    messages = of(session, events.UserMessage)
    assert messages == []
    [outer] = of(session, events.ToolResult)
    assert outer.message.content[0].tool_call_id == of(session, events.ToolCall)[0].call_id


async def test_outer_abort_stops_a_busy_loop_promptly(session):
    signal = Signal()
    asyncio.get_running_loop().call_later(0.3, signal.abort, "user pressed stop")
    started = time.perf_counter()
    result = await run(session, "while True:\n    pass", signal=signal)
    assert time.perf_counter() - started < 4.0          # the wall-clock limit is 10 s
    assert result.is_error
    assert result.error.info.code in ("CODE_RUN_FAILED", "ABORTED")


async def test_cancelling_the_awaiting_task_stops_the_run(session):
    task = asyncio.ensure_future(run(session, "while True:\n    pass"))
    await asyncio.sleep(0.3)
    started = time.perf_counter()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    assert time.perf_counter() - started < 4.0          # the wall-clock limit is 10 s
    assert len(of(session, events.ToolResult)) == len(of(session, events.ToolCall)) == 1


IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}


@tool(concurrency_safe=True, render=lambda args, value: [{"type": "text", "text": "a chart"},
                                                         IMAGE])
def chart() -> str:
    """Renders an image."""
    return "chart"


async def test_an_image_in_a_sub_call_result_follows_the_outer_result(session):
    session.register(chart)
    result = await run(session, "chart()")
    assert result.value["result"] == "chart"
    [outer] = of(session, events.ToolResult)
    [message] = of(session, events.UserMessage)
    assert message.seq > outer.seq
    assert list(message.message.content) == [{"type": "text", "text": "a chart"}, IMAGE]


async def test_an_image_removed_by_a_nested_post_execute_decision_is_not_deferred(session):
    session.register(chart)

    async def text_only(execution, result, next):
        if execution.name == "chart":
            return Accept(content=[{"type": "text", "text": "a chart (image removed)"}])
        return await next()

    session.on("tools/post-execute", text_only)
    await run(session, "chart()")
    assert of(session, events.UserMessage) == []


async def test_a_runtime_that_fails_after_starting_a_binding_still_drains(session):
    class FailsMidRun:
        def run(self, request, dispatch, cancel=None):
            dispatch(SubCallBatch(calls=(SubCall(id=1, name="slow", args=msgspec.Raw(b'{"ms":50}'),
                                                 arguments={"ms": 50}),)))
            raise RuntimeError("runtime broke")

    s = Session(tools=TOOLS)
    CodeMode(s, sandbox=FailsMidRun())
    result = await s.call("run_code", {"code": "slow(ms=50)"})
    assert result.is_error
    starts, settles = of(s, events.CodeDispatchStart), of(s, events.CodeDispatch)
    assert len(starts) == len(settles) == 1
    [outer] = of(s, events.ToolResult)
    assert settles[0].seq < outer.seq


@pytest.mark.parametrize(("code", "text"), [("7", "7"), ("1e16", "1e+16"), ("0.1", "0.1"),
                                            ("True", "true"), ("[1, 'é']", '[\n  1,\n  "é"\n]')])
async def test_a_final_value_is_shown_as_its_json(session, code, text):
    """A number or a bool as `json.dumps` writes it; a container indented, its text as it is."""
    result = await session.call("run_code", {"code": code})
    assert not result.is_error and result.text == text
