"""The command line, run as a user would (a real subprocess)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def codemode(*args, timeout=120):
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}   # no wrapping of messages
    return subprocess.run([sys.executable, "-m", "codemode", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env)


def test_help_lists_the_commands():
    done = codemode("--help")
    assert done.returncode == 0
    assert "run" in done.stdout and "demo" in done.stdout


def test_run_help():
    done = codemode("run", "--help")
    assert done.returncode == 0
    assert "--mcp" in done.stdout and "--log" in done.stdout


def test_demo_runs_on_the_builtin_toolset(tmp_path):
    log = tmp_path / "demo.jsonl"
    done = codemode("demo", "--log", str(log))
    assert done.returncode == 0, done.stderr
    assert "open orders total: 155.50" in done.stdout
    assert "lookup failed as expected" in done.stdout
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    types = [line["type"] for line in lines]
    assert types.count("tool/call") == types.count("tool/result") == 1
    assert types.count("tool/code-dispatch-start") == types.count("tool/code-dispatch") == 8


def test_run_prints_output_value_and_json(tmp_path):
    program = tmp_path / "p.py"
    program.write_text("print('hi')\n[add(a=1, b=2), add(a=3, b=4)]\n")
    done = codemode("run", str(program), "--builtin", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["is_error"] is False
    assert out["value"]["result"] == [3, 7]
    assert out["value"]["logs"] == ["hi\n"]
    assert out["value"]["subcalls"]["total"] == 2


def test_failing_program_exits_1_with_the_traceback(tmp_path):
    program = tmp_path / "bad.py"
    program.write_text("x = 1\nraise ValueError('broken')\n")
    done = codemode("run", str(program))
    assert done.returncode == 1
    assert "code run failed (exception): broken" in done.stdout
    assert 'File "<program>", line 2' in done.stdout


def test_missing_program_is_a_usage_error(tmp_path):
    done = codemode("run", str(tmp_path / "nope.py"))
    assert done.returncode == 2
    assert "does not exist" in done.stderr


def test_mcp_server_that_cannot_start_is_a_clear_error(tmp_path):
    program = tmp_path / "p.py"
    program.write_text("1\n")
    done = codemode("run", str(program), "--mcp", "definitely-not-a-command-xyz", timeout=60)
    assert done.returncode == 2
    assert "definitely-not-a-command-xyz" in done.stderr


def test_reusing_a_log_file_shows_only_this_run(tmp_path):
    program = tmp_path / "p.py"
    program.write_text("add(a=1, b=2)\n")
    log = tmp_path / "session.db"
    for _ in range(2):
        done = codemode("run", str(program), "--builtin", "--log", str(log))
        assert done.returncode == 0, done.stderr
        assert "1 sub-call(s), 0 failed" in done.stdout


def test_a_program_that_is_not_utf8_is_a_clear_error(tmp_path):
    program = tmp_path / "latin1.py"
    program.write_bytes(b"print('caf\xe9')\n")
    done = codemode("run", str(program))
    assert done.returncode == 2
    assert "is not valid UTF-8 (byte 10); save the program as UTF-8" in done.stderr


def test_terminal_control_sequences_from_the_program_are_made_visible(tmp_path):
    program = tmp_path / "esc.py"
    program.write_text("print('\\x1b[31mRED\\x1b]0;title\\x07')\n")
    done = codemode("run", str(program))
    assert done.returncode == 0
    assert "\x1b" not in done.stdout
    assert "\\x1b[31mRED\\x1b]0;title\\x07" in done.stdout


def test_limits_out_of_range_name_the_option(tmp_path):
    program = tmp_path / "p.py"
    program.write_text("1\n")
    done = codemode("run", str(program), "--timeout", "inf")
    assert done.returncode == 2
    assert "--timeout must be between 0 and 86400 seconds" in done.stderr


def test_the_sub_call_table_says_why_each_call_failed(tmp_path):
    program = tmp_path / "p.py"
    program.write_text("for call in (lambda: get_order(order_id='ord-9999'), lambda: call_tool('nope'),\n"
                       "             lambda: add(a='x', b=1)):\n"
                       "    try:\n        call()\n    except ToolCallError:\n        pass\n")
    done = codemode("run", str(program), "--builtin")
    shown = done.stdout + done.stderr
    assert done.returncode == 0, shown
    assert "TOOL_ERROR: Error: no order 'ord-9999'" in shown
    assert 'UNKNOWN_TOOL: Error: unknown tool "nope"' in shown
    assert "INVALID_ARGS: Error: invalid arguments" in shown


@pytest.mark.log_unchecked("a log left with its turn open on purpose")
def test_log_check_reports_violations_and_exit_status(tmp_path):
    from codemode.pipeline import events, open_log

    sound = tmp_path / "sound.jsonl"
    done = codemode("run", str(ROOT / "fixtures" / "demo_program.py"), "--builtin", "--log", str(sound))
    assert done.returncode == 0, done.stderr
    checked = codemode("log", "check", str(sound))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.strip().endswith("events, no violations")

    open_turn = tmp_path / "open.db"                       # left open, as by a crash
    with open_log(open_turn) as log:
        log.append(events.TurnStart(turn=1))
    checked = codemode("log", "check", str(open_turn))
    assert checked.returncode == 1
    assert checked.stdout.splitlines() == ["seq 1: UNCLOSED_TURN: the log ends with turn 1 open"]
    assert codemode("log", "check", "--partial", str(open_turn)).returncode == 0

    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("not a log\n")
    unreadable = codemode("log", "check", str(garbage))
    assert unreadable.returncode == 2 and "corrupt session log" in unreadable.stderr
