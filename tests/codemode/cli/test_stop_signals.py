"""SIGTERM and SIGHUP stop `run`, `resume`, `serve` and `eval` cleanly (issue 17, item 5): the
sub-call in flight is settled, the turn closes, the lock goes, and the exit status is
128 + the signal's number. Real processes, real signals, real log files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE_POLICY = ROOT / "fixtures" / "policies" / "example.toml"
SIGNALS = [signal.SIGTERM, signal.SIGHUP]
LIMIT_S = 120


def env() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}


def start(*args: str, cwd: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "codemode", *args], cwd=cwd, env=env(),
                            stdout=kw.pop("stdout", subprocess.PIPE),
                            stderr=subprocess.PIPE, text=True, **kw)


def wait_for_dispatch(log: Path, proc: subprocess.Popen, count: int = 1) -> None:
    """Until the log shows `count` sub-calls started (the program is mid-run)."""
    deadline = time.monotonic() + LIMIT_S
    while True:
        text = log.read_text() if log.exists() else ""
        if text.count('"tool/code-dispatch-start"') >= count:
            return
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, text
        time.sleep(0.1)


def assert_clean_stop(proc: subprocess.Popen, log: Path, signum: int) -> None:
    _, err = proc.communicate(timeout=LIMIT_S)
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, err
    assert err.endswith(f"codemode: stopped by {name}\n"), err
    assert not Path(f"{log}.lock").exists()
    check = subprocess.run([sys.executable, "-m", "codemode", "log", "check", str(log)],
                           capture_output=True, text=True, env=env(), timeout=LIMIT_S)
    assert check.returncode == 0, check.stdout + check.stderr
    kinds = [json.loads(line)["type"] for line in log.read_text().splitlines()]
    assert kinds.count("tool/code-dispatch-start") == kinds.count("tool/code-dispatch")
    assert kinds.count("tool/call") == kinds.count("tool/result")


@pytest.mark.slow
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_run_stopped_by_a_signal_closes_its_log(tmp_path, signum):
    program = tmp_path / "nap.py"
    program.write_text("sleep_ms(ms=60000)\n")
    log = tmp_path / "run.jsonl"
    proc = start("run", str(program), "--builtin", "--log", str(log), cwd=tmp_path)
    wait_for_dispatch(log, proc)
    proc.send_signal(signum)
    assert_clean_stop(proc, log, signum)


@pytest.mark.slow
def test_resume_stopped_by_sigterm_closes_its_log(tmp_path):
    program = tmp_path / "nap.py"
    program.write_text("sleep_ms(ms=60000)\n")
    log = tmp_path / "run.jsonl"
    options = ["--builtin", "--policy", str(EXAMPLE_POLICY)]
    paused = subprocess.run([sys.executable, "-m", "codemode", "run", str(program), *options,
                             "--log", str(log)], capture_output=True, text=True, env=env(),
                            cwd=tmp_path, timeout=LIMIT_S)
    assert paused.returncode == 3, paused.stderr
    run_id = next(json.loads(line)["callId"] for line in log.read_text().splitlines()
                  if json.loads(line)["type"] == "tool/call")
    proc = start("resume", str(log), run_id, *options, "--approve", "1", cwd=tmp_path)
    wait_for_dispatch(log, proc, count=2)
    proc.send_signal(signal.SIGTERM)
    assert_clean_stop(proc, log, signal.SIGTERM)


RUN_CODE_CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "run_code", "arguments": {"code": "sleep_ms(ms=60000)"}}}


@pytest.mark.slow
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_serve_stopped_by_a_signal_mid_run_closes_its_log(tmp_path, signum):
    log = tmp_path / "serve.jsonl"
    proc = start("serve", "--builtin", "--log", str(log), cwd=tmp_path,
                 stdin=subprocess.PIPE)
    assert proc.stdin is not None
    hello = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        RUN_CODE_CALL,
    ]
    for message in hello:
        proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()
    wait_for_dispatch(log, proc)
    proc.send_signal(signum)
    assert_clean_stop(proc, log, signum)
    proc.stdin.close()


@pytest.mark.slow
def test_eval_stopped_by_sigterm_stops_its_workers(tmp_path):
    case = tmp_path / "benign-nap.py"
    case.write_text("# id: benign-nap\n# category: benign\n# expect: sleeps\n"
                    "# source: common model idiom\n# oracle: stdout-equals-reference\n"
                    "import time\ntime.sleep(4)\nprint('done')\n")
    proc = start("eval", str(case), "--policy", str(ROOT / "fixtures/policies/default.toml"),
                 cwd=tmp_path)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=LIMIT_S)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.endswith("codemode: stopped by SIGTERM\n"), err
