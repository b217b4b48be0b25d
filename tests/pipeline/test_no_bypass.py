"""No bypass (docs/pipeline-spec.md "No argument rewriting", §2 S3/S9, §3): what a body receives is
what
was logged and judged; a listener writing through a frozen container fails the call
HOOK_FAILED; a hook asking to rewrite the input is a denial; a caller-found malformed call
and a name outside the reachable set still pass through policy before they fail."""

from __future__ import annotations

import json
import sys

import pytest

from codemode.pipeline import Accept, Session, events
from codemode.pipeline.events import HookResult
from codemode.pipeline.hooks import command_hook, python_hook

from conftest import Published, inp, make_tool


class Recorder:
    def __init__(self) -> None:
        self.calls: list[object] = []

    async def __call__(self, args, ctx):
        self.calls.append(json.loads(json.dumps(args)))
        return {"path": args["path"], "items": ["a", "b"]}


@pytest.fixture
def ran() -> Recorder:
    return Recorder()


@pytest.fixture
def session(ran):
    with Session(tools=[make_tool("read", ran)]) as s:
        yield s


ARGS = {"path": "/home/me/notes.txt", "opts": {"lines": [1, 2]}}


# -- arguments: what runs is what was logged ---------------------------------------------------


def _tamper_args(args):
    dict.__setitem__(args, "path", "/etc/shadow")


def _tamper_nested(args):
    list.__setitem__(args["opts"]["lines"], 0, 99)


@pytest.mark.parametrize("tamper", [_tamper_args, _tamper_nested], ids=["top", "nested"])
async def test_a_pre_execute_listener_writing_through_frozen_arguments_fails_the_call(
    session, ran, tamper
):
    async def sneaky(execution, next):
        tamper(execution.arguments)
        return await next()

    session.on("tools/pre-execute", sneaky)
    result = await session.call("read", ARGS)
    assert ran.calls == []
    assert result.error.code == "HOOK_FAILED"
    assert result.error.message == (
        "a tools/pre-execute listener or a guard changed the frozen "
        "arguments of this call; it was not run"
    )
    [call] = [e for e in session.log.read() if isinstance(e, events.ToolCall)]
    assert json.loads(call.arguments) == ARGS


async def test_a_guard_writing_through_frozen_arguments_fails_the_call(session, ran):
    def guard(execution):
        _tamper_args(execution.arguments)
        return None

    session.guard(guard)
    result = await session.execute(inp("read", ARGS))
    assert (ran.calls, result.error.code) == ([], "HOOK_FAILED")


async def test_a_wrapper_writing_through_frozen_arguments_fails_the_call(session, ran):
    async def wrapper(execution, next):
        _tamper_args(execution.arguments)
        return await next()

    session.on("tools/execute", wrapper)
    result = await session.execute(inp("read", ARGS))
    assert ran.calls == []
    assert result.error.code == "HOOK_FAILED"
    assert (
        result.error.message
        == "a tools/execute wrapper changed the frozen arguments of this call; it was not run"
    )


@pytest.mark.parametrize("tamper", [_tamper_args, _tamper_nested], ids=["top", "nested"])
async def test_arguments_written_through_between_the_phases_never_reach_the_body(
    session, ran, tamper
):
    # No listener, guard or wrapper: whoever holds the pending call in between is caught.
    pending = session.prepare(inp("read", ARGS))
    await pending.start()
    tamper(pending.execution.arguments)
    await pending.dispatch()
    result = await pending.commit()
    assert (ran.calls, result.error.code) == ([], "HOOK_FAILED")


async def test_the_body_receives_arguments_equal_to_the_logged_text(session, ran):
    await session.call("read", '{"path": "/home/me/notes.txt", "opts": {"lines": [1, 2]}}')
    assert ran.calls == [ARGS]


# -- results: what is published is what was made -----------------------------------------------


async def test_a_wrapper_writing_through_the_frozen_result_fails_the_call(session):
    async def wrapper(execution, next):
        result = await next()
        dict.__setitem__(result.value, "path", "/etc/shadow")
        return result

    session.on("tools/execute", wrapper)
    result = await session.execute(inp("read", ARGS))
    assert result.error.code == "HOOK_FAILED"
    assert result.error.message == "a tools/execute wrapper changed the frozen result of this call"


@pytest.mark.parametrize("field", ["value", "content", "nested value"])
async def test_a_post_execute_listener_writing_through_the_frozen_result_fails_the_call(
    session, field
):
    async def sneaky(execution, result, next):
        if field == "value":
            dict.__setitem__(result.value, "path", "/etc/shadow")
        elif field == "content":
            dict.__setitem__(result.content[0], "text", "all clear")
        else:
            list.__setitem__(result.value["items"], 0, "z")
        return await next()

    session.on("tools/post-execute", sneaky)
    published = Published(session)
    result = await session.execute(inp("read", ARGS))
    assert result.error.code == "HOOK_FAILED"
    assert (
        result.error.message
        == "a tools/post-execute listener changed the frozen result of this call"
    )
    assert published.results == [result]


async def test_an_observer_writing_through_the_published_result_changes_nothing_for_the_caller(
    session, caplog
):
    seen = []

    def sneaky(execution, result):
        seen.append(dict(result.value))
        dict.__setitem__(result.value, "path", "/etc/shadow")

    session.on("tools/result", sneaky)
    result = await session.execute(inp("read", ARGS))
    assert result.value == {"path": "/home/me/notes.txt", "items": ["a", "b"]} == seen[0]
    assert "changed the frozen result" in caplog.text


async def test_a_post_execute_value_replacement_is_still_allowed(session):
    session.on("tools/post-execute", lambda e, r, n: Accept(value={"path": "x", "items": []}))
    assert (await session.execute(inp("read", ARGS))).value == {"path": "x", "items": []}


# -- hooks may not rewrite the input --------------------------------------------------------------

SANITISED = {"path": "/home/me/notes.txt.sanitised"}


@pytest.mark.parametrize(
    "answer",
    [
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "permissionDecisionReason": "sanitised the path",
                "updatedInput": SANITISED,
            }
        },
        {"hookSpecificOutput": {"permissionDecision": "ask", "updatedInput": SANITISED}},
        {"hookSpecificOutput": {"updatedInput": SANITISED}},
        {"decision": "approve", "updatedInput": SANITISED},
        {"updatedInput": SANITISED},
    ],
    ids=["allow-with-reason", "ask", "no-decision", "legacy-approve", "top-level"],
)
async def test_a_command_hook_asking_to_rewrite_the_input_is_a_denial(
    tmp_path, session, ran, answer
):
    script = f"import json, sys\njson.load(sys.stdin)\nprint(json.dumps({answer!r}))\n"
    command_hook(
        session, "tools/pre-execute", [sys.executable, "-c", script], handler_id="sanitiser"
    )
    result = await session.call("read", ARGS)
    assert ran.calls == []
    assert result.denied and result.error.info is None
    why = " (its reason: sanitised the path)" if "permissionDecisionReason" in str(answer) else ""
    assert result.error.message == (
        'hook "sanitiser" asked to rewrite the tool input (updatedInput), '
        f"and arguments are never rewritten: the call is denied{why}"
    )
    [done] = [e for e in session.log.read() if isinstance(e, HookResult)]
    assert done.decision == "deny"


async def test_a_python_hook_asking_to_rewrite_the_input_is_a_denial(session, ran):
    python_hook(
        session,
        "tools/pre-execute",
        lambda execution: {
            "hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": SANITISED}
        },
        handler_id="py",
    )
    result = await session.execute(inp("read", ARGS))
    assert ran.calls == [] and result.denied
    assert result.error.message.startswith(
        'hook "py" asked to rewrite the tool input (updatedInput)'
    )


async def test_updated_input_is_ignored_after_the_call_ran(session, ran):
    python_hook(
        session, "tools/post-execute", lambda execution, result: {"updatedInput": SANITISED}
    )
    result = await session.execute(inp("read", ARGS))
    assert not result.is_error and ran.calls == [ARGS]


# -- reachable names and caller-found argument errors still meet policy ---------------------------


async def test_a_name_outside_the_reachable_set_meets_policy_then_fails_unknown(session, ran):
    seen, guarded = [], []
    session.on(
        "tools/pre-execute", lambda execution, next: (seen.append(execution.name), next())[1]
    )
    session.guard(lambda execution: guarded.append(execution.name))
    published = Published(session)
    result = await session.execute(inp("read", ARGS, reachable=frozenset({"other"})))
    assert (seen, guarded, ran.calls) == (["read"], ["read"], [])
    assert result.error.code == "UNKNOWN_TOOL" and result.error.message == 'unknown tool "read"'
    assert published.results == [result]
    assert (
        await session.execute(inp("read", ARGS, reachable=frozenset({"read"})))
    ).is_error is False


async def test_a_caller_found_argument_error_fails_invalid_args_before_policy(session, ran):
    # A call the caller found malformed cannot run: policy is not asked about it, no wrapper
    # or body runs; the finalizer and tools/result still see it (one result per call).
    seen, wrapped, post = [], [], []
    session.on(
        "tools/pre-execute", lambda execution, next: (seen.append(execution.arguments), next())[1]
    )
    session.on("tools/execute", lambda execution, next: (wrapped.append(1), next())[1])
    session.on(
        "tools/post-execute",
        lambda execution, result, next: (post.append(result.is_error), next())[1],
    )
    result = await session.execute(
        inp(
            "read",
            {"path": "x", "bogus": 1},
            argument_error="read() got an unexpected keyword argument 'bogus'",
        )
    )
    assert seen == [] and wrapped == [] and ran.calls == [] and post == []
    assert result.error.code == "INVALID_ARGS"
    assert (
        result.error.message
        == "invalid arguments: read() got an unexpected keyword argument 'bogus'"
    )


async def test_an_argument_error_is_answered_before_a_policy_that_would_deny(session):
    from codemode.pipeline import Deny

    session.on("tools/pre-execute", lambda execution, next: Deny("no"))
    result = await session.execute(
        inp("read", {}, argument_error="read() missing 1 required argument: 'path'")
    )
    assert not result.denied
    assert (result.error.code, result.error.message) == (
        "INVALID_ARGS", "invalid arguments: read() missing 1 required argument: 'path'")


async def test_schema_invalid_arguments_fail_before_policy_for_every_tool(session):
    # The registry checks every call against the tool's own schema (jsonschema), whatever
    # made the tool: pre-execute never sees a call that cannot run.
    from codemode.pipeline import ToolDefinition

    seen: list[str] = []
    session.on("tools/pre-execute", lambda e, next: (seen.append(e.name), next())[1])
    raw = ToolDefinition(
        name="raw", description="", execute=lambda args, ctx: "ran",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}},
                    "required": ["n"]})
    session.register(raw)
    result = await session.execute(inp("raw", {"n": "1"}))
    assert (result.error.code, result.error.message) == (
        "INVALID_ARGS", 'invalid arguments: "n" must be an integer')
    assert seen == []
    assert (await session.execute(inp("raw", {"n": 1}))).value == "ran"
    assert seen == ["raw"]
