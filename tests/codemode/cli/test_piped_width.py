"""Drawn at the terminal's width, whole when piped: with stdout and stderr pipes and no
COLUMNS (what a script, a CI log or `| less` gives), no table cell, case id, message or
argument list is cut or wrapped; on a terminal, lines are drawn to fit it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .test_cli import codemode_on_a_terminal

ROOT = Path(__file__).resolve().parents[3]
LONG_QUERY = ("how do the sandbox limits interact with the policy rules when a program "
              "gathers many tool calls at once and one of them is refused by a rule")
LONG_ID = "benign-" + "-".join(["a-case-id-long-enough-to-be-cut-in-a-narrow-table"] * 3)


def piped(*args: str, cwd: Path = ROOT, timeout: float = 300,
          **extra_env: str) -> subprocess.CompletedProcess[str]:
    """The command with every stream a pipe and no COLUMNS, as a script runs it."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(NO_COLOR="1", **extra_env)
    return subprocess.run([sys.executable, "-m", "codemode", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, env=env)


def test_an_invalid_policy_is_one_whole_line_into_a_pipe(tmp_path):
    policy = tmp_path / "bad.toml"
    policy.write_text('[[rules]]\ntool = "echo"\n'
                      'action = "deny_this_call_when_the_weather_is_bad_and_the_moon_is_full"\n')
    program = tmp_path / "p.py"
    program.write_text("1\n")
    done = piped("run", str(program), "--builtin", "--policy", str(policy))
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("invalid policy: ")
    assert "'deny_this_call_when_the_weather_is_bad_and_the_moon_is_full'; expected one of " \
           "'allow', 'ask', 'deny'" in lines[0]


@pytest.mark.slow
def test_the_card_is_whole_into_a_pipe(tmp_path):
    program = tmp_path / "p.py"
    program.write_text(f"hits = search_docs(query={LONG_QUERY!r})\n"
                       f"{LONG_QUERY!r} + ' (done)'\n")
    done = piped("run", str(program), "--builtin", "--table")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert any(f"{LONG_QUERY} (done)" in line for line in lines), done.stderr   # the value
    row = next(line for line in lines if "search_docs" in line)
    assert f'"query": "{LONG_QUERY}"' in row, done.stderr           # arguments, not cut
    assert "…" not in done.stderr
    assert max(len(line) for line in lines) > 200                   # no 80 columns


@pytest.mark.slow
def test_log_show_is_whole_into_a_pipe_and_cut_to_a_terminal(tmp_path):
    program = tmp_path / "p.py"
    program.write_text(f"search_docs(query={LONG_QUERY!r})\n")
    log = tmp_path / "run.jsonl"
    ran = piped("run", str(program), "--builtin", "--log", str(log))
    assert ran.returncode == 0, ran.stderr
    shown = piped("log", "show", str(log))
    assert shown.returncode == 0, shown.stderr
    assert f'└── search_docs(query="{LONG_QUERY}") · ok' in shown.stdout, shown.stdout
    status, _, terminal = codemode_on_a_terminal("log", "show", str(log), stdout_tty=True)
    assert status == 0
    row = next(line for line in terminal.decode().splitlines() if "search_docs(" in line)
    head = row.split(" · ")[0]
    assert head.endswith("…)") and len(head) <= 120        # COLUMNS=120 on the terminal


@pytest.mark.slow
def test_eval_tables_are_whole_into_a_pipe(tmp_path):
    case = tmp_path / "case.py"
    case.write_text(f"# id: {LONG_ID}\n# category: import\n# expect: a refused import\n"
                    "# source: test\n# oracle: leak:file\n"
                    "try:\n    import socket\nexcept ImportError as exc:\n"
                    "    print('refused:', type(exc).__name__)\n")
    done = piped("eval", str(case), "--policy", str(ROOT / "fixtures/policies/default.toml"))
    assert done.returncode == 0, done.stderr
    row = next((line for line in done.stdout.splitlines() if LONG_ID in line), None)
    assert row is not None, done.stdout                   # the id whole, on one line
    assert "blocked" in row and "completed, every attempt refused:" in row, row
    policy = ROOT / "fixtures/policies/default.toml"
    assert f"per category (wasm tier, {policy})" in done.stdout.splitlines()
    assert any(line.startswith("1 cases in ") and line.endswith(
        "s: 0 escaped, 0 affected the host") for line in done.stdout.splitlines()), done.stdout


def test_an_eval_usage_error_is_one_whole_line_into_a_pipe(tmp_path):
    missing = tmp_path / ("a-corpus-directory-with-a-name-long-enough-to-wrap-at-80-columns-"
                          "and-then-some")
    done = piped("eval", str(missing), "--policy", str(ROOT / "fixtures/policies/default.toml"))
    assert done.returncode == 2
    assert done.stderr == f"error: {missing}: no such file or directory\n"


def test_cache_list_is_whole_into_a_pipe(tmp_path):
    cache = tmp_path / ("a-cache-directory-with-a-name-long-enough-to-wrap-at-80-columns-"
                        "and-then-some")
    cache.mkdir()
    done = piped("cache", "list", CODEMODE_CACHE_DIR=str(cache))
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"{cache}: 0 component(s), 0.0 MiB\n"
