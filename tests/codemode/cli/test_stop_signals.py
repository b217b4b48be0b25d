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
    # faulthandler: a command that does not stop is sent SIGABRT, and says where it was
    return {**os.environ, "COLUMNS": "250", "NO_COLOR": "1", "PYTHONFAULTHANDLER": "1"}


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


PAUSING = ["--builtin", "--policy", str(EXAMPLE_POLICY)]    # its ask rule pauses the run


def pause_a_run(program: Path, cwd: Path) -> tuple[Path, str]:
    """`codemode run PROGRAM` paused for approval (exit 3): its log and its run id."""
    log = cwd / "run.jsonl"
    paused = subprocess.run([sys.executable, "-m", "codemode", "run", str(program), *PAUSING,
                             "--log", str(log)], capture_output=True, text=True, env=env(),
                            cwd=cwd, timeout=LIMIT_S)
    assert paused.returncode == 3, paused.stderr
    run_id = next(json.loads(line)["callId"] for line in log.read_text().splitlines()
                  if json.loads(line)["type"] == "tool/call")
    return log, run_id


@pytest.mark.slow
def test_resume_stopped_by_sigterm_closes_its_log(tmp_path):
    program = tmp_path / "nap.py"
    program.write_text("sleep_ms(ms=60000)\n")
    log, run_id = pause_a_run(program, tmp_path)
    proc = start("resume", str(log), run_id, *PAUSING, "--approve", "1", cwd=tmp_path)
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


# ---- started as a shell script starts `cmd &`: SIGINT ignored ------------------------------
# A non-interactive shell starts background commands with SIGINT (and SIGQUIT) ignored, so
# a stop that goes by way of SIGINT does nothing there: SIGTERM and SIGHUP must stop the
# command on their own, within a bound far below what the program would run.

STOP_BOUND_S = 30          # from the signal to the exit; the programs would run 120 s
LONG_PROGRAM = "get_weather(city='Paris')\nimport time\ntime.sleep(120)\n"


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def start_in_background(*args: str, cwd: Path, **kw) -> subprocess.Popen:
    return start(*args, cwd=cwd, preexec_fn=ignore_sigint, **kw)


def wait_for_event(log: Path, proc: subprocess.Popen, kind: str, count: int = 1) -> None:
    """Until the log holds `count` events of type `kind`."""
    deadline = time.monotonic() + LIMIT_S
    while True:
        text = log.read_text() if log.exists() else ""
        if text.count(f'"{kind}"') >= count:
            return
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, text
        time.sleep(0.1)


def stop_within_bound(proc: subprocess.Popen, signum: int) -> str:
    """Send `signum`; the command's stderr, once it has exited within `STOP_BOUND_S`."""
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=STOP_BOUND_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)       # faulthandler prints every thread's stack
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        raise AssertionError(f"still running {STOP_BOUND_S} s after "
                             f"{signal.Signals(signum).name}; its stderr, with the "
                             f"stacks:\n{err[-8000:]}") from None
    return err


@pytest.mark.slow
def test_a_shell_scripts_kill_stops_a_background_run_at_once(tmp_path):
    # The script a user writes: `cmd &`, then `kill -TERM`, then `wait` for the status. The
    # command exits 143 within a second of the signal (timed by the script itself), with
    # what the program printed so far on stdout and stderr.
    program = tmp_path / "sleep.py"
    program.write_text('import sys, time\nprint("sleeping", flush=True)\n'
                       'print("on stderr", file=sys.stderr)\nget_weather(city="Paris")\n'
                       "time.sleep(120)\n")
    log = tmp_path / "run.jsonl"
    script = (f"{sys.executable} -m codemode run sleep.py --builtin --timeout 180 "
              "--log run.jsonl & P=$!\n"
              "while ! grep -q '\"tool/code-dispatch\"' run.jsonl 2>/dev/null; do sleep 0.1; done\n"
              "T0=$(date +%s%N); kill -TERM $P; wait $P; S=$?; T1=$(date +%s%N)\n"
              "echo status=$S ms=$(( (T1 - T0) / 1000000 ))\n")
    started = time.monotonic()
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env(),
                          capture_output=True, text=True, timeout=LIMIT_S + 100)
    assert time.monotonic() - started < 100          # far from the program's 120 s
    lines = done.stdout.splitlines()
    assert lines[:-1] == ["sleeping"], done.stdout + done.stderr
    status, ms = lines[-1].split()
    assert status == "status=143", done.stdout + done.stderr
    assert int(ms.removeprefix("ms=")) < 1000, f"exited {ms} after SIGTERM"
    assert done.stderr == "on stderr\ncodemode: stopped by SIGTERM\n", done.stderr
    assert not Path(f"{log}.lock").exists()


@pytest.mark.slow
def test_resume_stopped_by_sigterm_prints_the_output_so_far(tmp_path):
    program = tmp_path / "nap.py"
    # add() after the print: its dispatch in the log says the print is done (a loaded
    # machine can take its time between sleep_ms's answer and the next line)
    program.write_text('print("before", flush=True)\nsleep_ms(ms=5)\n'
                       'print("resumed", flush=True)\nadd(a=1, b=2)\n'
                       'import time\ntime.sleep(120)\n')
    log, run_id = pause_a_run(program, tmp_path)
    dispatched = log.read_text().count('"tool/code-dispatch"')
    proc = start_in_background("resume", str(log), run_id, *PAUSING, "--approve", "1",
                               cwd=tmp_path)
    wait_for_event(log, proc, "tool/code-dispatch", count=dispatched + 2)   # add ran
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=LIMIT_S)
    assert proc.returncode == 143, err
    assert out == "before\nresumed\n"
    assert err == "codemode: stopped by SIGTERM\n"


@pytest.mark.slow
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_run_with_sigint_ignored_stops_on_a_signal(tmp_path, signum):
    program = tmp_path / "nap.py"
    program.write_text(LONG_PROGRAM)
    log = tmp_path / "run.jsonl"
    proc = start_in_background("run", str(program), "--builtin", "--timeout", "180",
                               "--log", str(log), cwd=tmp_path)
    wait_for_event(log, proc, "tool/code-dispatch")      # the program is running
    err = stop_within_bound(proc, signum)
    assert proc.returncode == 128 + signum, err
    assert_clean_stop(proc, log, signum)


@pytest.mark.slow
def test_an_ignored_sigint_stays_ignored(tmp_path):
    program = tmp_path / "nap.py"
    program.write_text(LONG_PROGRAM)
    log = tmp_path / "run.jsonl"
    proc = start_in_background("run", str(program), "--builtin", "--timeout", "180",
                               "--log", str(log), cwd=tmp_path)
    wait_for_event(log, proc, "tool/code-dispatch")
    proc.send_signal(signal.SIGINT)     # discarded: had it been caught, the exit would be 130
    err = stop_within_bound(proc, signal.SIGTERM)
    assert proc.returncode == 143, err
    assert err == "codemode: stopped by SIGTERM\n"


@pytest.mark.slow
def test_resume_with_sigint_ignored_stops_on_sigterm(tmp_path):
    program = tmp_path / "nap.py"
    program.write_text("sleep_ms(ms=60000)\nimport time\ntime.sleep(120)\n")
    log, run_id = pause_a_run(program, tmp_path)
    proc = start_in_background("resume", str(log), run_id, *PAUSING, "--approve", "1",
                               cwd=tmp_path)
    wait_for_dispatch(log, proc, count=2)
    err = stop_within_bound(proc, signal.SIGTERM)
    assert proc.returncode == 143, err
    assert_clean_stop(proc, log, signal.SIGTERM)


@pytest.mark.slow
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_serve_with_sigint_ignored_stops_on_a_signal(tmp_path, signum):
    log = tmp_path / "serve.jsonl"
    proc = start_in_background("serve", "--builtin", "--log", str(log), cwd=tmp_path,
                               stdin=subprocess.PIPE)
    assert proc.stdin is not None
    for message in [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        RUN_CODE_CALL,
    ]:
        proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()
    wait_for_dispatch(log, proc)
    err = stop_within_bound(proc, signum)
    assert proc.returncode == 128 + signum, err
    assert_clean_stop(proc, log, signum)
    proc.stdin.close()


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def start_eval(case: Path) -> tuple[subprocess.Popen, list[int]]:
    """`codemode eval CASE` in the background (SIGINT ignored) under a policy whose wall
    clock outlasts the case, once it has started a child: the process and its children."""
    policy = case.parent / "long.toml"
    policy.write_text("[limits]\nwall_clock_s = 180.0\n")
    proc = start_in_background("eval", str(case), "--policy", str(policy), cwd=case.parent)
    deadline = time.monotonic() + LIMIT_S
    while not (children := _children(proc.pid)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return proc, children


@pytest.mark.slow
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_eval_with_sigint_ignored_stops_its_workers_on_a_signal(tmp_path, signum):
    case = tmp_path / "slow-case.py"
    case.write_text("# id: slow-case\n# category: resource-cpu\n# expect: runs long\n"
                    "# source: test\n# oracle: time:300\nimport time\ntime.sleep(120)\n")
    proc, workers = start_eval(case)
    err = stop_within_bound(proc, signum)
    assert proc.returncode == 128 + signum, err
    assert err.endswith(f"codemode: stopped by {signal.Signals(signum).name}\n"), err
    assert not [pid for pid in workers if _alive(pid)]


@pytest.mark.slow
def test_eval_stops_at_once_while_a_benign_case_runs_natively(tmp_path):
    # A benign case first runs natively (the reference its stdout is compared with), for up
    # to 30 s: a stop must kill that run too, not wait for it.
    case = tmp_path / "slow-benign.py"
    case.write_text("# id: slow-benign\n# category: benign\n# expect: runs long\n"
                    "# source: test\nimport time\ntime.sleep(120)\nprint('done')\n")
    proc, children = start_eval(case)
    time.sleep(1.0)                        # the reference run is under way
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("eval still running 20 s after SIGTERM") from None
    took = time.monotonic() - sent
    assert proc.returncode == 143, err
    # the reference run alone would hold it 30 s; a loaded machine still stops in a few
    assert took < 10, f"eval took {took:.1f} s to stop"
    assert not [pid for pid in children if _alive(pid)]
