"""A run paused for approval and resumed by deterministic replay (docs/codemode.md "Pausing
for approval"): pending results, `Session.resume`, replayed sub-calls, recorded clocks and
randomness, REPLAY_DIVERGED, idempotency keys; both log backends and both tiers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from codemode import CodeMode, Session, events, tool
from codemode.pipeline import (
    ApprovalDecision,
    Ask,
    ResumeError,
    RunContext,
    ToolDefinition,
)
from codemode.pipeline.log import check
from codemode.sandbox import RestrictedSandbox, WasmSandbox

ROOT = Path(__file__).resolve().parents[3]

PROGRAM = textwrap.dedent("""\
    import asyncio
    print("start")
    a = step_a(note="first")
    print("a ran", a["count"])
    async def both():
        return await asyncio.gather(step_b(note="b"), step_c(note="c"),
                                    return_exceptions=True)
    b, c = asyncio.run(both())
    print("b:", b if isinstance(b, Exception) else b["tool"])
    print("c:", type(c).__name__, getattr(c, "code", None))
    "done"
    """)


def counting_tools(counts: Path) -> list[ToolDefinition]:
    """`step_a`, `step_b`, `step_c`: each adds one to its counter in the JSON file `counts`
    (so counts survive the process) and remembers the idempotency key it was given."""

    lock = threading.Lock()           # concurrency-safe tools run on several threads

    def bump(name: str, note: str, ctx: RunContext) -> dict[str, Any]:
        with lock:
            data = json.loads(counts.read_text()) if counts.exists() else {}
            data[name] = data.get(name, 0) + 1
            data.setdefault("keys", {}).setdefault(name, []).append(ctx.idempotency_key)
            counts.write_text(json.dumps(data))
        return {"tool": name, "count": data[name], "note": note}

    @tool(concurrency_safe=True)
    def step_a(ctx: RunContext, note: str = "") -> dict[str, Any]:
        """Count a call of A."""
        return bump("step_a", note, ctx)

    @tool(concurrency_safe=True)
    def step_b(ctx: RunContext, note: str = "") -> dict[str, Any]:
        """Count a call of B."""
        return bump("step_b", note, ctx)

    @tool(concurrency_safe=True)
    def step_c(ctx: RunContext, note: str = "") -> dict[str, Any]:
        """Count a call of C."""
        return bump("step_c", note, ctx)

    return [step_a, step_b, step_c]


def ask_for(*names: str, defer: bool = False) -> Any:
    async def rules(execution: Any, next: Any) -> Any:
        if execution.name in names:
            return Ask(f"{execution.name} changes things", defer=defer)
        return await next()
    return rules


def make_session(log: Path, counts: Path, *, sandbox: Any = None,
                 approval: Any = None, defer: bool = False,
                 resumable: bool | None = None) -> Session:
    session = Session(counting_tools(counts), log=log, approval=approval)
    session.on("tools/pre-execute", ask_for("step_b", "step_c", defer=defer))
    CodeMode(session, sandbox=sandbox, resumable=resumable)
    return session


def counts_of(counts: Path) -> dict[str, Any]:
    return json.loads(counts.read_text()) if counts.exists() else {}


def text_of(result: Any) -> str:
    return "".join(b.get("text", "") for b in result.content)


@pytest.fixture(params=["jsonl", "db"])
def log_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return tmp_path / f"session.{request.param}"


@pytest.fixture(params=["wasm", "restricted"])
def sandbox(request: pytest.FixtureRequest) -> Any:
    return WasmSandbox() if request.param == "wasm" else RestrictedSandbox()


async def test_a_paused_run_lists_every_approval_of_the_batch(log_path: Path, tmp_path: Path,
                                                              sandbox: Any) -> None:
    counts = tmp_path / "counts.json"
    session = make_session(log_path, counts, sandbox=sandbox)
    result = await session.call("run_code", {"code": PROGRAM}, call_id="run1")
    session.close()

    assert not result.is_error, text_of(result)
    value = result.value
    assert value["status"] == "pending"
    assert value["run_id"] == "run1"
    assert [(r["id"], r["toolName"], r["arguments"]) for r in value["approvals"]] == [
        ("run1:2", "step_b", {"note": "b"}), ("run1:3", "step_c", {"note": "c"})]
    assert value["approvals"][0]["reason"] == "step_b changes things"
    assert "".join(value["logs"]) == "start\na ran 1\n"
    assert "need a person's approval" in text_of(result)
    assert counts_of(counts) == {"step_a": 1, "keys": {"step_a": ["run1:1"]}}

    logged = list(Session(log=log_path).log.read())
    [suspended] = [e for e in logged if isinstance(e, events.ToolSuspended)]
    assert suspended.run_id == "run1" and suspended.call_id == "run1"
    assert [r.id for r in suspended.requests] == ["run1:2", "run1:3"]
    assert check(logged) == []


async def test_a_new_session_resumes_without_running_a_tool_twice(
        log_path: Path, tmp_path: Path, sandbox: Any) -> None:
    counts = tmp_path / "counts.json"
    first = make_session(log_path, counts, sandbox=sandbox)
    pending = await first.call("run_code", {"code": PROGRAM}, call_id="run1")
    assert pending.value["status"] == "pending"
    await first.aclose()

    second = make_session(log_path, counts, sandbox=sandbox)
    result = await second.resume("run1", [
        ApprovalDecision(id="run1:2", approved=True),
        ApprovalDecision(id="run1:3", approved=False, reason="not today")])
    await second.aclose()

    assert not result.is_error, text_of(result)
    assert "".join(result.value["logs"]) == (
        "start\na ran 1\nb: step_b\nc: ToolDenied DENIED\n")
    assert result.value["result"] == "done"
    assert result.value["subcalls"]["total"] == 3
    data = counts_of(counts)
    assert (data["step_a"], data["step_b"], data.get("step_c", 0)) == (1, 1, 0)
    assert data["keys"] == {"step_a": ["run1:1"], "step_b": ["run1:2"]}

    # an uninterrupted run with the same decisions prints the same
    async def decide(request: Any, next: Any) -> str:
        return "allowed-once" if request.tool_name == "step_b" else "rejected"
    straight = make_session(tmp_path / "straight.jsonl", tmp_path / "straight.json",
                            sandbox=sandbox, approval="ask")
    straight.on("approval/answer", decide)
    whole = await straight.call("run_code", {"code": PROGRAM}, agent="main")
    await straight.aclose()
    assert whole.value["logs"] == result.value["logs"]

    logged = list(Session(log=log_path).log.read())
    assert check(logged) == []
    replayed = [e for e in logged if isinstance(e, events.CodeReplayed)]
    assert [(e.name, e.replayed_from, e.parent_call_id) for e in replayed] == [
        ("step_a", "run1:code:1", "run1:resume:1")]
    settled = [e for e in logged if isinstance(e, events.CodeDispatch)]
    assert [(e.sub_call_id, e.name, e.code if e.is_error else "ok") for e in settled] == [
        ("run1:code:1", "step_a", "ok"),
        ("run1:code:2", "step_b", "APPROVAL_PENDING"),
        ("run1:code:3", "step_c", "APPROVAL_PENDING"),
        ("run1:resume:1:code:2", "step_b", "ok"),
        ("run1:resume:1:code:3", "step_c", "DENIED")]
    [resumed] = [e for e in logged if isinstance(e, events.ToolResumed)]
    assert resumed.call_id == "run1:resume:1"
    results = [e for e in logged if isinstance(e, events.ToolResult)]
    assert [r.call_id for r in results] == ["run1", "run1:resume:1"]


async def test_a_suspension_is_resumed_once(tmp_path: Path) -> None:
    counts, log = tmp_path / "counts.json", tmp_path / "s.db"
    session = make_session(log, counts)
    await session.call("run_code", {"code": PROGRAM}, call_id="r")
    with pytest.raises(ResumeError, match="no decision for pending approval"):
        await session.resume("r", {"r:2": True})
    with pytest.raises(ResumeError, match="no pending approval has the id 'r:9'"):
        await session.resume("r", {"r:2": True, "r:3": True, "r:9": True})
    with pytest.raises(ResumeError, match="holds no suspended run 'nope'"):
        await session.resume("nope", {})
    done = await session.resume("r", {"r:2": True, "r:3": True})
    assert done.value["subcalls"]["failed"] == 0
    with pytest.raises(ResumeError, match="already resumed"):
        await session.resume("r", {"r:2": True, "r:3": True})
    await session.aclose()
    data = counts_of(counts)
    assert (data["step_a"], data["step_b"], data["step_c"]) == (1, 1, 1)


async def test_a_resumed_run_that_needs_another_approval_pauses_again(tmp_path: Path) -> None:
    counts, log = tmp_path / "counts.json", tmp_path / "s.jsonl"
    program = textwrap.dedent("""\
        step_a()
        first = step_b(note="one")["count"]
        second = step_b(note="two")["count"]
        step_a()
        [first, second]
        """)
    session = make_session(log, counts)
    pending = await session.call("run_code", {"code": program}, call_id="r")
    assert [a["id"] for a in pending.value["approvals"]] == ["r:2"]
    again = await session.resume("r", {"r:2": True})
    assert [a["id"] for a in again.value["approvals"]] == ["r:3"]
    done = await session.resume("r", {"r:3": True})
    await session.aclose()
    assert done.value["result"] == [1, 2]
    data = counts_of(counts)
    assert (data["step_a"], data["step_b"]) == (2, 2)
    assert data["keys"]["step_b"] == ["r:2", "r:3"]
    assert check(list(Session(log=log).log.read())) == []


async def test_a_deferring_rule_pauses_even_with_an_approver(tmp_path: Path) -> None:
    counts, log = tmp_path / "counts.json", tmp_path / "s.jsonl"
    asked: list[str] = []

    async def answer(request: Any, next: Any) -> str:
        asked.append(request.tool_name)
        return "allowed-once"

    session = make_session(log, counts, approval="ask", defer=True)
    session.on("approval/answer", answer)
    pending = await session.call("run_code", {"code": PROGRAM}, agent="main", call_id="r")
    assert pending.value["status"] == "pending" and asked == []
    done = await session.resume("r", {"r:2": True, "r:3": False})
    await session.aclose()
    assert asked == []        # the decisions came with the resumption, audited as answers
    logged = list(Session(log=log).log.read())
    decided = [e.outcome for e in logged if isinstance(e, events.ApprovalDecided)]
    assert decided == ["allowed-once", "rejected"]
    assert "c: ToolDenied DENIED" in "".join(done.value["logs"])


TIME_AND_CHANCE = textwrap.dedent("""\
    import datetime, os, random, secrets, time, uuid
    seen = [time.time(), time.monotonic(), random.random(), str(uuid.uuid4()),
            os.urandom(4).hex(), secrets.token_hex(4), datetime.datetime.now().isoformat()]
    print(seen)
    step_a(note=str(seen[2]))
    step_b(note=seen[3])
    print("after", random.random())
    """)


async def test_time_and_randomness_replay_identically(tmp_path: Path) -> None:
    counts, log = tmp_path / "counts.json", tmp_path / "s.db"
    session = make_session(log, counts)
    pending = await session.call("run_code", {"code": TIME_AND_CHANCE}, call_id="r")
    assert pending.value["status"] == "pending", text_of(pending)
    before = pending.value["logs"][0]
    await session.aclose()

    session = make_session(log, counts)
    done = await session.resume("r", {"r:2": True})
    await session.aclose()
    assert not done.is_error, text_of(done)
    assert done.value["logs"][0] == before
    assert done.value["logs"][1].startswith("after ")
    assert counts_of(counts)["step_a"] == 1


async def test_unrecorded_randomness_diverges_and_runs_nothing(tmp_path: Path) -> None:
    counts, log = tmp_path / "counts.json", tmp_path / "s.jsonl"
    session = make_session(log, counts, resumable=False)     # clocks and randomness unrecorded
    pending = await session.call("run_code", {"code": TIME_AND_CHANCE}, call_id="r")
    assert pending.value["status"] == "pending"
    done = await session.resume("r", {"r:2": True})
    await session.aclose()
    assert done.is_error
    assert done.error is not None and done.error.code == "REPLAY_DIVERGED"
    message = text_of(done)
    assert "sub-call 1: the program called step_a(" in message and "where the log holds step_a(" \
        in message
    data = counts_of(counts)
    assert (data["step_a"], data.get("step_b", 0)) == (1, 0)
    assert check(list(Session(log=log).log.read())) == []


def test_a_new_process_resumes_what_another_paused(tmp_path: Path) -> None:
    """The issue's scenario end to end: A runs, B and C wait; the process exits; another
    process resumes with B approved and C denied."""
    counts, log = tmp_path / "counts.json", tmp_path / "s.db"
    script = textwrap.dedent(f"""\
        import asyncio, json, sys
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from tests.codemode.run.test_resume import PROGRAM, make_session
        from codemode.pipeline import ApprovalDecision

        async def main():
            session = make_session(Path({str(log)!r}), Path({str(counts)!r}))
            if sys.argv[1] == "run":
                result = await session.call("run_code", {{"code": PROGRAM}}, call_id="run1")
            else:
                result = await session.resume("run1", [
                    ApprovalDecision(id="run1:2", approved=True),
                    ApprovalDecision(id="run1:3", approved=False)])
            await session.aclose()
            print(json.dumps(result.value))

        asyncio.run(main())
        """)
    path = tmp_path / "drive.py"
    path.write_text(script)

    def drive(mode: str) -> dict[str, Any]:
        done = subprocess.run([sys.executable, str(path), mode], capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        value: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return value

    pending = drive("run")
    assert [a["id"] for a in pending["approvals"]] == ["run1:2", "run1:3"]
    final = drive("resume")
    assert "".join(final["logs"]) == "start\na ran 1\nb: step_b\nc: ToolDenied DENIED\n"
    data = counts_of(counts)
    assert (data["step_a"], data["step_b"], data.get("step_c", 0)) == (1, 1, 0)


async def test_an_approval_service_nobody_answers_defers_too(tmp_path: Path) -> None:
    counts, log = tmp_path / "counts.json", tmp_path / "s.jsonl"
    session = make_session(log, counts, approval="ask")    # mounted, but no answerer
    assert not session.has_approver("main")
    pending = await session.call("run_code", {"code": PROGRAM}, agent="main", call_id="r")
    assert pending.value["status"] == "pending"
    session.on("approval/answer", lambda request, next: "allowed-once")
    assert session.has_approver("main")
    whole = await session.call("run_code", {"code": PROGRAM}, agent="main")
    await session.aclose()
    assert "c: dict None" in "".join(whole.value["logs"])      # C ran: approved


async def test_a_call_the_program_cancelled_is_not_asked_for_and_never_runs(
        tmp_path: Path) -> None:
    counts, log = tmp_path / "counts.json", tmp_path / "s.jsonl"
    program = textwrap.dedent("""\
        import asyncio
        async def main():
            waiting = asyncio.ensure_future(step_b(note="given up"))
            await asyncio.sleep(0.05)
            waiting.cancel()
            return (await step_c(note="wanted"))["tool"]
        asyncio.run(main())
        """)
    session = make_session(log, counts)
    pending = await session.call("run_code", {"code": program}, call_id="r")
    assert [a["toolName"] for a in pending.value["approvals"]] == ["step_c"]
    [request] = pending.value["approvals"]
    done = await session.resume("r", {request["id"]: True})
    await session.aclose()
    assert done.value["result"] == "step_c", text_of(done)
    data = counts_of(counts)
    assert (data.get("step_b", 0), data["step_c"]) == (0, 1)
    assert check(list(Session(log=log).log.read())) == []


# ---- a hostile program, a careless resume ----------------------------------------------

RAW_BATCHES = textwrap.dedent("""\
    import json, sys
    host = sys.modules["wit_world.imports.host"]
    def send(*calls, until=None):
        batch = {"calls": [{"id": i, "name": n, "args": a} for i, n, a in calls],
                 "cancel": [], "wait_s": None, "until": until}
        return json.loads(host.dispatch(json.dumps(batch)))["results"]
    print(send((1, "step_a", {"note": "x"})))
    print(send((1, "step_a", {"note": "x"})))            # a reused id: refused, unnumbered
    got = send((2, "step_b", {"note": "big"}), (2, "step_b", {"note": "stolen"}),
               (3, "step_c", {"note": "small"}))
    while len(got) < 3:       # a reply holds what settled so far: wait for the rest
        got += send()
    print(sorted((r["id"], r["ok"], r.get("code")) for r in got))
    """)


async def test_a_reused_id_takes_no_number_and_no_approval_on_replay(tmp_path: Path) -> None:
    counts, log = tmp_path / "counts.json", tmp_path / "s.jsonl"
    session = make_session(log, counts)
    pending = await session.call("run_code", {"code": RAW_BATCHES}, call_id="r")
    shown = [(a["id"], a["toolName"], a["arguments"]) for a in pending.value["approvals"]]
    assert shown == [("r:2", "step_b", {"note": "big"}), ("r:3", "step_c", {"note": "small"})]
    done = await session.resume("r", {"r:2": False, "r:3": True})
    await session.aclose()
    assert not done.is_error, text_of(done)
    data = counts_of(counts)
    assert (data["step_a"], data.get("step_b", 0), data["step_c"]) == (1, 0, 1)
    assert done.value["subcalls"]["failed"] == 1     # the denial (a reused id is no call)
    assert "".join(done.value["logs"]).splitlines()[-1] == \
        "[(2, False, 'DENIED'), (2, False, 'TOOL_ERROR'), (3, True, None)]"
    assert check(list(Session(log=log).log.read())) == []


async def test_a_denial_holds_when_no_rule_asks_any_more(tmp_path: Path) -> None:
    counts, log = tmp_path / "counts.json", tmp_path / "s.jsonl"
    session = make_session(log, counts)
    await session.call("run_code", {"code": PROGRAM}, call_id="r")
    await session.aclose()
    careless = Session(counting_tools(counts), log=log)    # resumed without the ask rule
    CodeMode(careless)
    done = await careless.resume("r", {"r:2": True, "r:3": False})
    await careless.aclose()
    assert "c: ToolDenied DENIED" in "".join(done.value["logs"])
    data = counts_of(counts)
    assert (data["step_a"], data["step_b"], data.get("step_c", 0)) == (1, 1, 0)


async def test_a_resume_that_cannot_replay_leaves_the_run_paused(tmp_path: Path) -> None:
    counts, log = tmp_path / "counts.json", tmp_path / "s.db"
    session = make_session(log, counts)
    await session.call("run_code", {"code": PROGRAM}, call_id="r")
    await session.aclose()
    without_a = Session([t for t in counting_tools(counts) if t.name != "step_a"], log=log)
    CodeMode(without_a)
    failed = await without_a.resume("r", {"r:2": True, "r:3": True})
    await without_a.aclose()
    assert failed.is_error and failed.error is not None
    assert failed.error.code == "REPLAY_DIVERGED"
    assert "NameError" in text_of(failed) and "still paused" in text_of(failed)
    session = make_session(log, counts)                   # the right tools: it goes on
    done = await session.resume("r", {"r:2": True, "r:3": True})
    await session.aclose()
    assert not done.is_error, text_of(done)
    data = counts_of(counts)
    assert (data["step_a"], data["step_b"], data["step_c"]) == (1, 1, 1)
    assert check(list(Session(log=log).log.read())) == []


def test_arguments_must_be_the_same_json_text_on_replay() -> None:
    """`1` and `true` are equal in Python, not in JSON: a replayed call sending the other
    is a divergence, never the recorded call with other arguments."""
    from codemode._run.replay import Exchange, RecordedCall, divergence
    from codemode.sandbox import SubCall

    recorded = Exchange(calls=(RecordedCall(id=1, name="step_b", args='{"note":1}'),))
    same = SubCall(id=1, name="step_b", args=msgspec.Raw(b'{"note":1}'), arguments={"note": 1})
    other = SubCall(id=1, name="step_b", args=msgspec.Raw(b'{"note":true}'),
                    arguments={"note": True})
    assert divergence(1, [same], [], recorded, 1) is None
    why = divergence(1, [other], [], recorded, 1)
    assert why == ('sub-call 1: the program called step_b({"note":true}) where the log holds '
                   'step_b({"note":1})')


async def test_a_record_holding_another_program_is_refused(tmp_path: Path) -> None:
    counts, log = tmp_path / "counts.jsonl"[:-1], tmp_path / "s.jsonl"
    session = make_session(log, counts)
    await session.call("run_code", {"code": PROGRAM}, call_id="r")
    await session.aclose()
    lines = log.read_text().splitlines()
    tampered = [line.replace('"code":"import asyncio', '"code":"step_c()\\nimport asyncio', 1)
                if '"tool/suspended"' in line and '"state"' in line else line for line in lines]
    assert tampered != lines
    log.write_text("\n".join(tampered) + "\n")
    session = make_session(log, counts)
    done = await session.resume("r", {"r:2": True, "r:3": True})
    await session.aclose()
    # the program changed in the record alone: its seal no longer matches (the record's
    # own check, "another program than its call", comes after it)
    assert done.error is not None and done.error.code == "RESUME_TAMPERED"
    assert counts_of(counts).get("step_c", 0) == 0


async def test_runs_record_only_when_they_can_pause(tmp_path: Path) -> None:
    recorded: list[bool] = []

    class Watched(WasmSandbox):
        def run(self, request: Any, dispatch: Any, cancel: Any = None) -> Any:
            recorded.append(request.tape is not None)
            return super().run(request, dispatch, cancel)

    session = Session(counting_tools(tmp_path / "counts.json"))
    CodeMode(session, sandbox=Watched())
    await session.call("run_code", {"code": "1"})          # nothing may ask: cannot pause
    session.on("tools/pre-execute", ask_for("step_b"))
    await session.call("run_code", {"code": "1"})          # may ask, nobody answers
    session.mount_approval("never")
    await session.call("run_code", {"code": "1"})          # an approver decides at once
    assert recorded == [False, True, False]
