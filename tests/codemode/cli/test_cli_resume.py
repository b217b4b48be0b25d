"""`codemode run` that pauses for approval and `codemode resume`, as a user runs them: each
command its own process, with a real MCP server (`codemode.fixtures.mcp_counter_server`)
counting in a file how many times each tool really ran."""

from __future__ import annotations

import json
import shlex
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.codemode.cli.test_cli import codemode, report
from tests.codemode.run.test_resume import PROGRAM

pytestmark = [pytest.mark.mcp, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE_POLICY = ROOT / "fixtures" / "policies" / "example.toml"

ASK_POLICY = textwrap.dedent("""\
    [[rules]]
    tool = "step_b"
    action = "ask"

    [[rules]]
    tool = "step_c"
    action = "ask"
    reason = "C changes things"
    """)

# The same decisions made up front: B allowed, C denied.
DECIDED_POLICY = textwrap.dedent("""\
    [[rules]]
    tool = "step_c"
    action = "deny"
    reason = "not today"
    """)


def counter(counts: Path) -> str:
    return f"{shlex.quote(sys.executable)} -m codemode.fixtures.mcp_counter_server {counts}"


def counts_of(counts: Path) -> dict[str, Any]:
    return json.loads(counts.read_text()) if counts.exists() else {}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "prog.py").write_text(PROGRAM, encoding="utf-8")
    (tmp_path / "ask.toml").write_text(ASK_POLICY, encoding="utf-8")
    (tmp_path / "decided.toml").write_text(DECIDED_POLICY, encoding="utf-8")
    return {"prog": tmp_path / "prog.py", "ask": tmp_path / "ask.toml",
            "decided": tmp_path / "decided.toml", "counts": tmp_path / "counts.json"}


@pytest.mark.parametrize("suffix", [".db", ".jsonl"])
def test_a_paused_run_resumes_in_another_process_without_running_a_tool_twice(
        tmp_path: Path, files: dict[str, Path], suffix: str) -> None:
    log, counts = tmp_path / f"session{suffix}", files["counts"]
    tools = ["--mcp", counter(counts), "--policy", str(files["ask"])]

    paused = codemode("run", str(files["prog"]), *tools, "--log", str(log), "--json")
    assert paused.returncode == 3, paused.stderr.decode()
    first = report(paused)
    run_id = first["run_id"]
    assert (first["ok"], first["kind"], first["code"], first["value"]) == (
        False, "pending", "paused", None)
    assert first["error"]["type"] == "RunPaused"
    assert first["stdout"] == "start\na ran 1\n"
    assert first["approvals"] == [
        {"id": f"{run_id}:2", "tool": "step_b", "arguments": {"note": "b"},
         "reason": 'policy requires approval for tool "step_b"'},
        {"id": f"{run_id}:3", "tool": "step_c", "arguments": {"note": "c"},
         "reason": "C changes things"}]
    assert [(r["tool"], r["code"]) for r in first["subcalls"]] == [
        ("step_a", None), ("step_b", "APPROVAL_PENDING"), ("step_c", "APPROVAL_PENDING")]
    assert counts_of(counts) == {"step_a": 1, "keys": [f"{run_id}:1"]}

    resumed = codemode("resume", str(log), run_id, *tools, "--approve", f"{run_id}:2",
                       "--deny", f"{run_id}:3:not today", "--json")
    assert resumed.returncode == 0, resumed.stderr.decode()
    final = report(resumed)
    assert (final["ok"], final["kind"], final["value"], final["run_id"]) == (
        True, "ok", "done", run_id)
    assert final["approvals"] == []
    rows = [(r["n"], r["tool"], r["ok"], r["code"], r["replayed_from"])
            for r in final["subcalls"]]
    assert rows == [(1, "step_a", True, None, f"{run_id}:code:1"),
                    (2, "step_b", True, None, None),
                    (3, "step_c", False, "DENIED", None)]
    assert final["subcalls"][2]["text"].endswith("not today")

    data = counts_of(counts)
    assert (data["step_a"], data["step_b"], data.get("step_c", 0)) == (1, 1, 0)
    assert data["keys"] == [f"{run_id}:1", f"{run_id}:2"]

    # the same decisions made up front print the same
    straight = codemode("run", str(files["prog"]), "--mcp", counter(tmp_path / "other.json"),
                        "--policy", str(files["decided"]), "--json")
    assert straight.returncode == 0, straight.stderr.decode()
    assert final["stdout"] == report(straight)["stdout"] == (
        "start\na ran 1\nb: step_b\nc: ToolDenied DENIED\n")

    # an approval is used once
    again = codemode("resume", str(log), run_id, *tools, "--approve-all")
    assert again.returncode == 2
    assert b"already resumed" in again.stderr and b"Traceback" not in again.stderr

    checked = codemode("log", "check", str(log))
    assert checked.returncode == 0, checked.stdout.decode()
    shown = codemode("log", "show", str(log)).stdout.decode()
    assert "paused · " in shown and f"resumed by {run_id}:resume:1" in shown
    assert f"replayed from {run_id}:code:1" in shown
    assert f"resumes run {run_id}: approved {run_id}:2, denied {run_id}:3 (not today)" in shown


def test_stderr_names_each_request_and_the_command_that_resumes(
        tmp_path: Path, files: dict[str, Path]) -> None:
    log, counts = tmp_path / "session.db", files["counts"]
    paused = codemode("run", str(files["prog"]), "--mcp", counter(counts),
                      "--policy", str(files["ask"]), "--log", str(log))
    assert paused.returncode == 3
    assert paused.stdout == b"start\na ran 1\n"
    lines = paused.stderr.decode().splitlines()
    header = next(line for line in lines if line.startswith("codemode: paused: "))
    run_id = header.rsplit("(run ", 1)[1].rstrip(")")
    assert header == f"codemode: paused: waiting for approval of 2 tool calls (run {run_id})"
    assert f'  {run_id}:2  step_b(note="b")  reason: policy requires approval for tool ' \
        '"step_b"' in lines
    assert f'  {run_id}:3  step_c(note="c")  reason: C changes things' in lines
    [command] = [line.strip() for line in lines if line.startswith("  codemode resume ")]

    argv = shlex.split(command)             # approves the first request, denies the rest
    assert argv[:4] == ["codemode", "resume", str(log), run_id]
    resumed = codemode(*argv[1:])
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert resumed.stdout == b"start\na ran 1\nb: step_b\nc: ToolDenied DENIED\n"
    data = counts_of(counts)
    assert (data["step_a"], data["step_b"], data.get("step_c", 0)) == (1, 1, 0)


# ---- cheaper cases, on the built-in toolset (the example policy asks before sleep_ms) -------

NAP = "print('before')\nslept = sleep_ms(ms=5)\nprint('after', slept)\nslept\n"


def pause_a_nap(tmp_path: Path, log: Path | None) -> tuple[Any, str]:
    path = tmp_path / "nap.py"
    path.write_text(NAP, encoding="utf-8")
    argv = ["run", str(path), "--builtin", "--policy", str(EXAMPLE_POLICY), "--json"]
    done = codemode(*argv, *(["--log", str(log)] if log is not None else []))
    assert done.returncode == 3, done.stderr.decode()
    return done, report(done)["run_id"]


def test_resume_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    _, run_id = pause_a_nap(tmp_path, log)
    options = ["--builtin", "--policy", str(EXAMPLE_POLICY)]

    def refused(*args: str) -> str:
        done = codemode("resume", *args)
        assert done.returncode == 2, (args, done.stderr.decode())
        assert done.stdout == b"" and b"Traceback" not in done.stderr
        return " ".join(done.stderr.decode().split())

    assert "holds no suspended run 'nope'" in refused(str(log), "nope", *options,
                                                      "--approve-all")
    assert f"no decision for pending approval(s): {run_id}:1" in refused(str(log), run_id,
                                                                         *options)
    assert f"no pending approval has the id '{run_id}:7'" in refused(
        str(log), run_id, *options, "--approve", f"{run_id}:7")
    assert f"approval '{run_id}:1' is decided twice" in refused(
        str(log), run_id, *options, "--approve", "1", "--deny", f"{run_id}:1")
    assert "--approve-all and --deny-all exclude each other" in refused(
        str(log), run_id, *options, "--approve-all", "--deny-all")
    assert "does not exist" in refused(str(tmp_path / "missing.db"), run_id, *options,
                                       "--approve-all")

    from codemode.pipeline import open_log
    with open_log(str(log)):
        assert "LogInUseError" in refused(str(log), run_id, *options, "--approve-all")

    # none of these consumed the suspension: a denial by number still resumes it
    denied = codemode("resume", str(log), run_id, *options, "--deny", "1:too sleepy", "--json")
    assert denied.returncode == 1, denied.stderr.decode()
    data = report(denied)
    assert (data["kind"], data["error"]["type"]) == ("program_error", "ToolDenied")
    assert data["stdout"] == "before\n"
    assert "too sleepy" in data["error"]["message"]


def test_a_resumed_run_that_asks_again_pauses_again_with_exit_3(tmp_path: Path) -> None:
    log = tmp_path / "session.db"
    path = tmp_path / "naps.py"
    path.write_text("a = sleep_ms(ms=1)\nb = sleep_ms(ms=2)\n[a, b]\n", encoding="utf-8")
    options = ["--builtin", "--policy", str(EXAMPLE_POLICY)]
    first = codemode("run", str(path), *options, "--log", str(log), "--json")
    assert first.returncode == 3
    run_id = report(first)["run_id"]
    second = codemode("resume", str(log), run_id, *options, "--approve-all", "--json")
    assert second.returncode == 3, second.stderr.decode()
    assert [a["id"] for a in report(second)["approvals"]] == [f"{run_id}:2"]
    third = codemode("resume", str(log), run_id, *options, "--approve", "2")
    assert third.returncode == 0, third.stderr.decode()
    assert third.stdout == b""


def test_a_run_without_a_log_refuses_to_start_rather_than_pause_for_good(tmp_path: Path) -> None:
    path = tmp_path / "nap.py"
    path.write_text(NAP, encoding="utf-8")
    done = codemode("run", str(path), "--builtin", "--policy", str(EXAMPLE_POLICY))
    assert done.returncode == 2
    assert done.stdout == b""                          # the program never started
    text = " ".join(done.stderr.decode().split())
    assert "rules[0].action: an `ask` rule for 'sleep_ms' would pause a program's run" in text
    assert "give it a log file (--log FILE on the command line" in text
    assert "codemode: paused" not in text
