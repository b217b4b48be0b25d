"""kill -9 at every event boundary of a pause and a resume (`tests.kill_after`: the process
SIGKILLs itself right after the log appends the chosen event, no timing involved), on both
log backends: the log reopens (crash repair), checks clean, the paused run can still be
resumed to its end, and no tool runs twice for one approval: a sub-call the crashed
resumption settled is answered from the log (same idempotency key, not run again); only a
call whose outcome the crash left unknown may run again, with the same key."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from codemode.pipeline import Session, events
from codemode.pipeline.log import check, load
from tests._fuzz import examples
from tests.codemode.cli.test_cli import report
from tests.codemode.cli.test_cli_resume import ASK_POLICY, counter
from tests.codemode.run.test_resume import PROGRAM

pytestmark = [pytest.mark.mcp, pytest.mark.slow]

#: `CODEMODE_KILL_POINTS=all` runs every boundary on both backends (44 cases, minutes);
#: the default suite runs each boundary that behaves differently, every event type on at
#: least one backend and the resumption's own events on both (docs/development.md)
ALL_POINTS = os.environ.get("CODEMODE_KILL_POINTS") == "all"
#: each example runs processes for seconds: a failure is reported as found, not shrunk
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)

ROOT = Path(__file__).resolve().parents[3]

#: every event type a paused run writes, in the order it first writes them
PAUSE_POINTS = ["turn/start", "step/start", "tool/call", "tool/code-dispatch-start",
                "tool/code-dispatch", "tool/suspended", "tool/result", "step/end", "turn/end"]
#: every event a resumption of PROGRAM writes (type, occurrence in that process)
RESUME_POINTS = [("tool/resumed", 1), ("turn/start", 1), ("step/start", 1), ("tool/call", 1),
                 ("tool/code-replayed", 1), ("tool/code-resumed", 1),
                 ("tool/code-dispatch-start", 1),
                 ("tool/code-dispatch", 1), ("tool/code-dispatch-start", 2),
                 ("tool/code-dispatch", 2), ("tool/result", 1), ("step/end", 1),
                 ("turn/end", 1)]


def cli(*args: str, kill_after: tuple[str, int] | None = None) -> subprocess.CompletedProcess:
    killer = [] if kill_after is None else ["-m", "tests.kill_after", kill_after[0],
                                            str(kill_after[1])]
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, *killer, "-m", "codemode", *args],
                          capture_output=True, timeout=120, cwd=ROOT, env=env)


def reopen(log: Path) -> None:
    """Open the log for writing (crash repair), close it, and check it."""
    Session(log=log).close()
    assert check(load(log)) == []


def keys_run(counts: Path) -> Counter[str]:
    data = json.loads(counts.read_text()) if counts.exists() else {}
    return Counter(data.get("keys", []))


def unknown_outcomes(log: Path) -> set[str]:
    """The idempotency keys (`<run id>:<n>`) of the sub-calls crash repair settled
    TOOL_OUTCOME_UNKNOWN: their tool may have run before the kill, so may run again."""
    return {f"{e.root_call_id}:{e.sub_call_id.rsplit(':', 1)[1]}" for e in load(log)
            if isinstance(e, events.CodeDispatch) and e.code == "TOOL_OUTCOME_UNKNOWN"}


def suspended_runs(log: Path) -> set[str]:
    return {e.run_id for e in load(log) if isinstance(e, events.ToolSuspended)}


def finishes(log: Path, run_id: str, tools: list[str]) -> None:
    """Resuming the run again ends it: exit 0 with the approved calls' output."""
    done = cli("resume", str(log), run_id, *tools, "--approve-all", "--json")
    assert done.returncode == 0, done.stderr.decode()
    assert report(done)["stdout"] == "start\na ran 1\nb: step_b\nc: dict None\n"
    assert check(load(log)) == []


def resume_again(log: Path, run_id: str, tools: list[str]) -> None:
    """After a killed resumption: a run whose resumed call got its result is over (a new
    resume is refused); any other finishes when resumed again."""
    finished = any(isinstance(e, events.ToolResult) and e.call_id.startswith(f"{run_id}:resume")
                   and not e.is_error for e in load(log))
    if finished:
        again = cli("resume", str(log), run_id, *tools, "--approve-all")
        assert again.returncode == 2 and b"already resumed" in again.stderr
    else:
        finishes(log, run_id, tools)


def at_most_once(counts: Path, log: Path) -> None:
    """Each idempotency key ran once, or twice when a crash left its first outcome unknown."""
    again = {key for key, n in keys_run(counts).items() if n > 1}
    assert max(keys_run(counts).values(), default=0) <= 2
    assert again <= unknown_outcomes(log)


@pytest.fixture(scope="module")
def paused(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path, str]]:
    """Per backend: a log of PROGRAM paused on step_b and step_c, its counts file, run id."""
    made = {}
    root = tmp_path_factory.mktemp("paused")
    (root / "prog.py").write_text(PROGRAM)
    (root / "ask.toml").write_text(ASK_POLICY)
    for suffix in (".db", ".jsonl"):
        log, counts = root / f"s{suffix}", root / f"counts{suffix}.json"
        done = cli("run", str(root / "prog.py"), "--mcp", counter(counts),
                   "--policy", str(root / "ask.toml"), "--log", str(log), "--json")
        assert done.returncode == 3, done.stderr.decode()
        made[suffix] = (log, counts, report(done)["run_id"])
    return made


def chosen(points: list[Any], default: dict[Any, tuple[str, ...]]) -> list[Any]:
    """(point, suffix) cases: every point on both backends, or the `default` ones."""
    return [pytest.param(*(p if isinstance(p, tuple) else (p,)), suffix)
            for p in points for suffix in (".db", ".jsonl")
            if ALL_POINTS or suffix in default.get(p, ())]


@pytest.mark.parametrize(("point", "suffix"), chosen(PAUSE_POINTS, {
    "turn/start": (".jsonl",), "tool/code-dispatch": (".db",), "tool/suspended": (".jsonl",),
    "tool/result": (".db",), "turn/end": (".jsonl",)}))
def test_kill_while_pausing(tmp_path: Path, suffix: str, point: str) -> None:
    log, counts = tmp_path / f"s{suffix}", tmp_path / "counts.json"
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "ask.toml").write_text(ASK_POLICY)
    tools = ["--mcp", counter(counts), "--policy", str(tmp_path / "ask.toml")]
    killed = cli("run", str(tmp_path / "prog.py"), *tools, "--log", str(log), "--json",
                 kill_after=(point, 1))
    assert killed.returncode == -9
    reopen(log)
    for run_id in suspended_runs(log):        # a run that got as far as pausing finishes
        finishes(log, run_id, tools)
    at_most_once(counts, log)


@pytest.mark.parametrize(("point", "nth", "suffix"), chosen(RESUME_POINTS, {
    ("tool/resumed", 1): (".db", ".jsonl"), ("turn/start", 1): (".jsonl",),
    ("step/start", 1): (".db",), ("tool/call", 1): (".jsonl",),
    ("tool/code-replayed", 1): (".db", ".jsonl"), ("tool/code-resumed", 1): (".db", ".jsonl"),
    ("tool/code-dispatch-start", 1): (".db",),
    ("tool/code-dispatch", 1): (".db", ".jsonl"), ("tool/code-dispatch", 2): (".jsonl",),
    ("tool/result", 1): (".db",), ("step/end", 1): (".jsonl",)}))
def test_kill_while_resuming(tmp_path: Path, paused: dict[str, tuple[Path, Path, str]],
                             suffix: str, point: str, nth: int) -> None:
    source, source_counts, run_id = paused[suffix]
    log, counts = tmp_path / source.name, tmp_path / "counts.json"
    shutil.copyfile(source, log)
    shutil.copyfile(source_counts, counts)
    policy = tmp_path / "ask.toml"
    policy.write_text(ASK_POLICY)
    tools = ["--mcp", counter(counts), "--policy", str(policy)]
    killed = cli("resume", str(log), run_id, *tools, "--approve-all", "--json",
                 kill_after=(point, nth))
    assert killed.returncode == -9, killed.stderr.decode()
    reopen(log)
    resume_again(log, run_id, tools)
    ran = keys_run(counts)
    assert all(ran[f"{run_id}:{n}"] >= 1 for n in (1, 2, 3)), ran
    at_most_once(counts, log)


CONCURRENT = """
import asyncio, sys
from codemode.pipeline import Session, ToolDefinition

async def slow(args, ctx):
    await asyncio.sleep(30)

async def main():
    session = Session(log=sys.argv[1])
    session.register(ToolDefinition(name="slow", description="waits", execute=slow,
                                    parameters={"type": "object"}))
    await asyncio.gather(session.call("slow", {}), session.call("slow", {}))

asyncio.run(main())
"""


@pytest.mark.parametrize("suffix", [".db", ".jsonl"])
def test_kill_during_two_concurrent_calls_closes_both_steps(tmp_path: Path,
                                                            suffix: str) -> None:
    script, log = tmp_path / "two.py", tmp_path / f"s{suffix}"
    script.write_text(CONCURRENT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    killed = subprocess.run([sys.executable, "-m", "tests.kill_after", "tool/call", "2",
                             str(script), str(log)], capture_output=True, timeout=60,
                            cwd=ROOT, env=env)
    assert killed.returncode == -9, killed.stderr.decode()
    opened = [e.step for e in load(log) if isinstance(e, events.StepStart)]
    assert len(opened) == 2
    with Session(log=log) as session:
        repaired = [type(e).__name__ for e in session.log.repaired]
    assert repaired == ["ToolResult", "ToolResult", "StepEnd", "StepEnd", "TurnEnd"]
    assert check(load(log)) == []


@settings(max_examples=examples(2), deadline=None, phases=NO_SHRINK,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(suffix=st.sampled_from([".db", ".jsonl"]), pause_at=st.integers(1, 14),
       resume_at=st.integers(1, 14))
def test_kill_at_any_event_of_a_pause_then_of_its_resumption(
        tmp_path_factory: pytest.TempPathFactory, suffix: str, pause_at: int,
        resume_at: int) -> None:
    """A kill after any event of the run (the 14th: none, it ends), then after any event of
    a resumption: the run still finishes once resumed, each tool at most once per key."""
    root = tmp_path_factory.mktemp("any")
    log, counts = root / f"s{suffix}", root / "counts.json"
    (root / "prog.py").write_text(PROGRAM)
    (root / "ask.toml").write_text(ASK_POLICY)
    tools = ["--mcp", counter(counts), "--policy", str(root / "ask.toml")]
    cli("run", str(root / "prog.py"), *tools, "--log", str(log), "--json",
        kill_after=("*", pause_at))
    reopen(log)
    for run_id in suspended_runs(log):
        killed = cli("resume", str(log), run_id, *tools, "--approve-all",
                     kill_after=("*", resume_at))
        reopen(log)
        if killed.returncode == -9:
            resume_again(log, run_id, tools)
    at_most_once(counts, log)


def test_an_answer_changed_in_the_log_is_not_trusted(
        tmp_path: Path, paused: dict[str, tuple[Path, Path, str]]) -> None:
    """The answers a crashed resumption left are sealed like the paused run's record: one
    changed in the log file is not used, its call runs again."""
    source, source_counts, run_id = paused[".jsonl"]
    log, counts = tmp_path / source.name, tmp_path / "counts.json"
    shutil.copyfile(source, log)
    shutil.copyfile(source_counts, counts)
    policy = tmp_path / "ask.toml"
    policy.write_text(ASK_POLICY)
    tools = ["--mcp", counter(counts), "--policy", str(policy)]
    killed = cli("resume", str(log), run_id, *tools, "--approve-all",
                 kill_after=("tool/code-dispatch", 1))
    assert killed.returncode == -9
    text = log.read_text()
    assert text.count('"tool": "step_b"') + text.count('"tool":"step_b"') >= 1
    log.write_text(text.replace('"tool":"step_b"', '"tool":"forged"'))
    reopen(log)
    finishes(log, run_id, tools)           # prints "b: step_b": the real answer, run again
    assert keys_run(counts)[f"{run_id}:2"] == 2

