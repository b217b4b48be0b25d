"""Command hooks: executables as pre-/post-execute listeners (docs/pipeline-spec.md §2 S4/S11,
§10)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import textwrap
import time
from pathlib import Path

import msgspec
import pytest

from codemode.pipeline import Deny, Session, Signal
from codemode.pipeline.events import HookInvoked, HookResult
from codemode.pipeline.hooks import DIALECT, command_hook

from conftest import error_text, make_tool


def hook_script(tmp_path: Path, body: str, name: str = "hook") -> list[str]:
    """argv running a small Python hook with ``body`` (``json``, ``os``, ``sys``, ``time``
    imported; ``payload`` holds the parsed stdin)."""
    path = tmp_path / f"{name}.py"
    path.write_text(
        "import json, os, sys, time\npayload = json.load(sys.stdin)\n" + textwrap.dedent(body)
    )
    return [sys.executable, str(path)]


class Recorder:
    """A tool body that records its calls."""

    def __init__(self) -> None:
        self.calls: list[object] = []

    async def __call__(self, args, ctx):
        self.calls.append(args)
        return {"ok": True}


@pytest.fixture
def ran() -> Recorder:
    return Recorder()


@pytest.fixture
def session(ran: Recorder):
    # `path` is declared: a program's binding takes the keywords its schema names (Python's
    # rules), so `write(path=...)` reaches the hooks.
    takes_path = {"type": "object", "properties": {"path": {"type": "string"}}}
    with Session(tools=[make_tool("write", ran, parameters=takes_path),
                        make_tool("read", ran, parameters=takes_path)]) as session:
        yield session


def hook_events(session: Session) -> list[object]:
    return [e for e in session.log.read() if isinstance(e, (HookInvoked, HookResult))]


def results(session: Session) -> list[HookResult]:
    return [e for e in session.log.read() if isinstance(e, HookResult)]


def code(result) -> str | None:
    return result.error.info.code if result.error and result.error.info else None


# -- pre-execute -----------------------------------------------------------------------------

async def test_exit_zero_without_output_delegates_and_the_tool_runs(tmp_path, session, ran):
    command_hook(
        session, "tools/pre-execute", hook_script(tmp_path, "sys.exit(0)\n"), handler_id="quiet"
    )
    result = await session.call("write", {"path": "a.txt"})
    assert result.is_error is False
    assert ran.calls == [{"path": "a.txt"}]
    invoked, done = hook_events(session)
    assert invoked == HookInvoked(
        seq=invoked.seq,
        time=invoked.time,
        turn=1,
        point="tools/pre-execute",
        dialect=DIALECT,
        handler_id="quiet",
    )
    assert (
        done.turn,
        done.point,
        done.handler_id,
        done.decision,
        done.exit_code,
        done.stderr_summary,
    ) == (1, "tools/pre-execute", "quiet", "delegate", 0, msgspec.UNSET)
    assert done.duration_ms > 0


async def test_exit_two_denies_with_stderr_as_the_reason(tmp_path, session, ran):
    argv = hook_script(tmp_path, "print('no writes here', file=sys.stderr)\nsys.exit(2)\n")
    command_hook(session, "tools/pre-execute", argv, handler_id="guard")
    result = await session.call("write", {"path": "a.txt"})
    assert result.content == error_text("no writes here")
    assert result.error.message == "no writes here"
    assert result.error.info is None
    assert ran.calls == []
    [done] = results(session)
    assert (done.decision, done.exit_code, done.stderr_summary) == ("deny", 2, "no writes here")


async def test_exit_two_without_stderr_denies_with_a_default_reason(tmp_path, session):
    command_hook(
        session, "tools/pre-execute", hook_script(tmp_path, "sys.exit(2)\n"), handler_id="mute"
    )
    result = await session.call("write", {})
    assert result.error.message == 'denied by hook "mute"'


@pytest.mark.parametrize(
    "answer",
    [
        {"decision": "deny", "reason": "not on Fridays"},
        {"decision": "block", "reason": "not on Fridays"},
        {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                "permissionDecisionReason": "not on Fridays"}},
        {"decision": "allow", "hookSpecificOutput": {"permissionDecision": "deny",
                                                     "permissionDecisionReason": "not on Fridays"}},
    ],
    ids=["decision-deny", "decision-block", "permission-deny", "permission-wins"],
)
async def test_a_json_deny_denies_with_its_reason(tmp_path, session, ran, answer):
    command_hook(
        session, "tools/pre-execute", hook_script(tmp_path, f"print(json.dumps({answer!r}))\n")
    )
    result = await session.call("write", {})
    assert result.content == error_text("not on Fridays")
    assert ran.calls == []
    assert results(session)[0].decision == "deny"


async def test_a_json_ask_without_an_approval_channel_denies_with_the_ask_reason(
    tmp_path, session, ran
):
    answer = {
        "hookSpecificOutput": {
            "permissionDecision": "ask",
            "permissionDecisionReason": "touches prod",
        }
    }
    command_hook(
        session, "tools/pre-execute", hook_script(tmp_path, f"print(json.dumps({answer!r}))\n")
    )
    result = await session.call("write", {})
    assert result.content == error_text("touches prod")
    assert ran.calls == []
    assert results(session)[0].decision == "ask"


async def test_a_json_ask_goes_to_the_approval_channel(tmp_path, ran):
    with Session(tools=[make_tool("write", ran)], approval="ask") as session:
        asked = []

        async def answer(request, next):
            asked.append((request.tool_name, request.reason))
            return "allowed-once"

        session.on("approval/answer", answer)
        command_hook(
            session,
            "tools/pre-execute",
            hook_script(
                tmp_path, 'print(json.dumps({"decision": "ask", "reason": "touches prod"}))\n'
            ),
        )
        result = await session.call("write", {}, agent="main")
        assert result.is_error is False
        assert asked == [("write", "touches prod")]
        assert len(ran.calls) == 1


async def test_a_json_allow_skips_later_listeners_but_not_guards(tmp_path, session, ran):
    command_hook(
        session, "tools/pre-execute", hook_script(tmp_path, 'print(\'{"decision": "allow"}\')\n')
    )
    session.on("tools/pre-execute", lambda execution, next: Deny("later listener"))
    assert (await session.call("write", {})).is_error is False
    session.guard(lambda execution: "owner policy")
    result = await session.call("write", {})
    assert result.content == error_text("owner policy")
    assert len(ran.calls) == 1
    assert [r.decision for r in results(session)] == ["allow", "allow"]


async def test_a_failing_hook_is_a_non_blocking_error(tmp_path, session, ran, caplog):
    argv = hook_script(tmp_path, "print('boom', file=sys.stderr)\nsys.exit(1)\n")
    command_hook(session, "tools/pre-execute", argv, handler_id="flaky")
    with caplog.at_level(logging.WARNING, logger="codemode.pipeline.hooks"):
        result = await session.call("write", {})
    assert result.is_error is False
    assert len(ran.calls) == 1
    assert [r.getMessage() for r in caplog.records] == [
        'hook "flaky" failed with exit code 1: boom'
    ]
    [done] = results(session)
    assert (done.decision, done.exit_code, done.stderr_summary) == ("error", 1, "boom")


@pytest.mark.parametrize(
    ("stdout", "decision"),
    [
        ("all good", "delegate"),
        ("{not json", "error"),
        ('{"decision": "maybe"}', "error"),
        ("{}", "delegate"),
    ],
)
async def test_output_that_is_no_decision_delegates(tmp_path, session, ran, stdout, decision):
    command_hook(session, "tools/pre-execute", hook_script(tmp_path, f"print({stdout!r})\n"))
    assert (await session.call("write", {})).is_error is False
    assert results(session)[0].decision == decision


async def test_the_hook_reads_the_call_as_json_on_stdin(tmp_path, session):
    seen = tmp_path / "seen.json"
    body = f"open({str(seen)!r}, 'w').write(json.dumps(payload))\n"
    command_hook(session, "tools/pre-execute", hook_script(tmp_path, body, "pre"))
    command_hook(
        session,
        "tools/post-execute",
        hook_script(tmp_path, body.replace("seen.json", "post.json"), "post"),
    )
    await session.call("write", {"path": "a.txt", "n": [1, 2]}, call_id="call_7", agent="main")
    common = {
        "tool_name": "write",
        "tool_input": {"path": "a.txt", "n": [1, 2]},
        "call_id": "call_7",
        "root_call_id": "call_7",
        "agent": "main",
        "cwd": os.getcwd(),
    }
    assert json.loads(seen.read_text()) == {"hook_event_name": "PreToolUse", **common}
    assert json.loads((tmp_path / "post.json").read_text()) == {
        "hook_event_name": "PostToolUse",
        **common,
        "tool_response": {
            "content": [{"type": "text", "text": '{\n  "ok": true\n}'}],
            "isError": False,
        },
    }


async def test_a_shell_command_line_works(tmp_path, session, ran):
    command_hook(session, "tools/pre-execute", "echo 'shell says no' >&2; exit 2")
    result = await session.call("write", {})
    assert result.content == error_text("shell says no")
    assert results(session)[0].decision == "deny"
    assert hook_events(session)[0].handler_id == "echo 'shell says no' >&2; exit 2"


# -- post-execute ----------------------------------------------------------------------------

async def test_exit_two_after_execution_blocks_the_result_with_stderr(tmp_path, session, ran):
    argv = hook_script(tmp_path, "print('output withheld', file=sys.stderr)\nsys.exit(2)\n")
    command_hook(session, "tools/post-execute", argv)
    result = await session.call("write", {})
    assert len(ran.calls) == 1
    assert result.is_error is True
    assert result.content == ({"type": "text", "text": "output withheld"},)
    assert result.error.message == "output withheld"
    assert result.value is msgspec.UNSET
    assert results(session)[0].decision == "block"


async def test_a_json_block_after_execution_blocks_with_its_reason(tmp_path, session):
    command_hook(
        session,
        "tools/post-execute",
        hook_script(
            tmp_path, 'print(json.dumps({"decision": "block", "reason": "secret in output"}))\n'
        ),
    )
    result = await session.call("write", {})
    assert result.content == ({"type": "text", "text": "secret in output"},)


async def test_additional_context_after_execution_is_attached_to_the_result(tmp_path, session):
    answer = {
        "hookSpecificOutput": {
            "hookEventName": "PostToolUse",
            "additionalContext": "run the tests next",
        }
    }
    command_hook(
        session, "tools/post-execute", hook_script(tmp_path, f"print(json.dumps({answer!r}))\n")
    )
    result = await session.call("write", {})
    assert result.is_error is False
    assert result.value == {"ok": True}
    assert result.additional_contexts == ("run the tests next",)
    assert results(session)[0].decision == "accept"


async def test_a_post_hook_sees_failures_too(tmp_path, session):
    seen = tmp_path / "seen.json"
    command_hook(session, "tools/pre-execute", "exit 2")
    command_hook(
        session,
        "tools/post-execute",
        hook_script(
            tmp_path, f"open({str(seen)!r}, 'w').write(json.dumps(payload['tool_response']))\n"
        ),
    )
    await session.call("write", {})
    assert json.loads(seen.read_text()) == {
        "content": [{"type": "text", "text": 'Error: denied by hook "exit 2"'}], "isError": True}


# -- matcher ---------------------------------------------------------------------------------

async def test_the_matcher_selects_tools_by_full_regex_match(tmp_path, session):
    marker = tmp_path / "ran.log"
    body = f"open({str(marker)!r}, 'a').write(payload['tool_name'] + '\\n')\n"
    command_hook(
        session,
        "tools/pre-execute",
        hook_script(tmp_path, body),
        matcher="write|edit",
        handler_id="m",
    )
    command_hook(session, "tools/pre-execute", hook_script(tmp_path, body, "prefix"), matcher="rea")
    await session.call("read", {})
    assert not marker.exists()
    assert hook_events(session) == []
    await session.call("write", {})
    assert marker.read_text() == "write\n"
    [invoked, _] = hook_events(session)
    assert (invoked.matcher, invoked.handler_id) == ("write|edit", "m")


async def test_the_disposer_removes_the_hook(tmp_path, session, ran):
    dispose = command_hook(session, "tools/pre-execute", "exit 2")
    dispose()
    assert (await session.call("write", {})).is_error is False
    assert hook_events(session) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"point": "tools/result"},
            ("command hooks attach to ('tools/pre-execute', 'tools/post-execute'), not "
             "'tools/result'"),
        ),
        ({"command": "  "}, "the hook command is empty"),
        ({"command": []}, "the hook argv must be a non-empty list of strings"),
        ({"timeout_s": 0}, "timeout_s must be a positive number of seconds, not 0"),
        (
            {"matcher": "("},
            ("hook matcher '(' is not a valid regular expression: missing ), unterminated "
             "subpattern at position 0"),
        ),
    ],
)
def test_bad_registrations_raise_at_once(session, kwargs, message):
    arguments = {"point": "tools/pre-execute", "command": "true", **kwargs}
    with pytest.raises(ValueError) as caught:
        command_hook(session, arguments.pop("point"), arguments.pop("command"), **arguments)
    assert str(caught.value) == message


# -- failures of the hook itself ---------------------------------------------------------------

@pytest.mark.slow
async def test_a_hook_past_its_timeout_is_killed_and_fails_the_call(tmp_path, session, ran):
    pid_file = tmp_path / "pid"
    argv = hook_script(
        tmp_path, f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(30)\n"
    )
    # long enough for the hook to start and write its pid on a loaded machine
    command_hook(session, "tools/pre-execute", argv, timeout_s=3.0, handler_id="slow")
    started = time.monotonic()
    result = await session.call("write", {})
    assert time.monotonic() - started < 15          # not the hook's 30 s
    assert code(result) == "HOOK_TIMEOUT"
    assert result.content == error_text('hook "slow" timed out after 3s')
    assert ran.calls == []
    [done] = results(session)
    assert (done.decision, done.exit_code) == ("timeout", msgspec.UNSET)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


async def test_a_post_hook_past_its_timeout_fails_the_call_on_the_final_route(
    tmp_path, session, ran
):
    command_hook(session, "tools/post-execute", "sleep 30", timeout_s=0.3, handler_id="slow")
    later = []
    session.on("tools/post-execute", lambda execution, result, next: later.append(1) or next())
    result = await session.call("write", {})
    assert len(ran.calls) == 1
    assert code(result) == "HOOK_TIMEOUT"
    assert result.error.message == 'hook "slow" timed out after 0.3s'
    assert later == []


async def test_a_hook_that_cannot_start_fails_the_call(tmp_path, session, ran):
    command_hook(session, "tools/pre-execute", [str(tmp_path / "missing-hook")], handler_id="gone")
    result = await session.call("write", {})
    assert code(result) == "HOOK_FAILED"
    assert result.error.message.startswith('hook "gone" could not be started: ')
    assert ran.calls == []
    assert results(session)[0].decision == "error"


async def test_aborting_the_call_kills_the_hook(tmp_path, session, ran):
    pid_file = tmp_path / "pid"
    argv = hook_script(
        tmp_path, f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(30)\n"
    )
    command_hook(session, "tools/pre-execute", argv, timeout_s=20)
    signal = Signal()

    async def abort_when_started():
        while not pid_file.exists() or not pid_file.read_text():
            await asyncio.sleep(0.01)
        signal.abort()

    aborter = asyncio.ensure_future(abort_when_started())
    result = await session.call("write", {}, signal=signal)
    await aborter
    assert code(result) == "ABORTED_BEFORE_DISPATCH"
    assert ran.calls == []
    assert results(session)[0].decision == "aborted"
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


async def test_no_hook_runs_for_a_call_already_aborted(tmp_path):
    signal = Signal()

    async def body(args, ctx):
        signal.abort()
        return "done"

    with Session(tools=[make_tool("write", body)]) as session:
        marker = tmp_path / "ran"
        command_hook(session, "tools/post-execute", f"touch {marker}")
        result = await session.call("write", {}, signal=signal)
        assert code(result) == "ABORTED"
        assert not marker.exists()
        assert hook_events(session) == []


async def test_a_running_hook_does_not_block_the_event_loop(tmp_path, session):
    command_hook(session, "tools/pre-execute", "sleep 0.5")
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.ensure_future(ticker())
    await session.call("write", {})
    task.cancel()
    assert ticks >= 5           # a blocked loop would tick at most once or twice in 0.5 s


# -- code mode -------------------------------------------------------------------------------

async def test_a_hook_denial_reaches_a_program_as_a_rejection(tmp_path, session, ran):
    codemode = pytest.importorskip("codemode")
    codemode.CodeMode(session)
    probe = await session.call("run_code", {"code": "1", "description": "probe"})
    if probe.is_error:  # pragma: no cover
        pytest.skip(f"sandbox not usable here: {probe.error.message}")
    seen = tmp_path / "seen.json"
    argv = hook_script(tmp_path, f"open({str(seen)!r}, 'w').write(json.dumps(payload))\n"
                                 "print('read-only session', file=sys.stderr)\nsys.exit(2)\n")
    command_hook(session, "tools/pre-execute", argv, matcher="write")
    program = (
        "try:\n"
        "    write(path='a.txt')\n"
        "except ToolCallError as exc:\n"
        "    print(exc.message)\n"
    )
    run = await session.call(
        "run_code", {"code": program, "description": "try a write"}, call_id="outer"
    )
    assert run.value["logs"] == ["read-only session\n"]
    assert ran.calls == []
    stdin = json.loads(seen.read_text())
    assert (stdin["call_id"], stdin["root_call_id"], stdin["parent_call_id"]) == (
        "outer:code:1",
        "outer",
        "outer",
    )
