"""`codemode run` and the type check before the run (docs/codemode.md "Type check before the
run"): a refused program is a report of kind "type_error", and no tool runs."""

import json

import pytest

from tests.codemode.cli.test_cli import codemode

pytestmark = pytest.mark.slow

BAD = 'print("first")\nadd(a=1, b=2)\nadd(a=1, b="x")\n'


def test_a_program_with_a_type_error_is_refused_before_any_tool_runs(tmp_path):
    program = tmp_path / "bad.py"
    program.write_text(BAD)
    done = codemode("run", str(program), "--builtin", "--json")
    assert done.returncode == 1, done.stderr.decode()
    report = json.loads(done.stdout)
    assert (report["ok"], report["kind"], report["code"]) == (False, "type_error", "type-check")
    assert report["subcalls"] == [] and report["stdout"] == ""
    [error] = report["type_errors"]
    assert (error["line"], error["column"], error["rule"]) == (3, 10, "invalid-argument-type")
    assert report["error"]["type"] == "TypeCheckFailed"
    assert report["error"]["message"].startswith("1 type error (<program>, line 3, column 10: ")
    assert '  File "<program>", line 3, column 10\n' in report["error"]["traceback"]

    text = codemode("run", str(program), "--builtin")
    assert text.returncode == 1 and text.stdout == b""
    assert text.stderr.decode().startswith(
        "codemode: code run failed (type-check): 1 type error (<program>, line 3, column 10: ")


def test_a_policy_can_ask_to_warn_instead(tmp_path):
    program, policy = tmp_path / "bad.py", tmp_path / "warn.toml"
    program.write_text("import random\nif random.random() > 2:\n    nope()\nadd(a=1, b=2)\n")
    policy.write_text('type_check = "warn"\n')
    done = codemode("run", str(program), "--builtin", "--json", "--policy", str(policy))
    report = json.loads(done.stdout)
    assert (done.returncode, report["kind"], report["value"]) == (0, "ok", 3), report
    assert [(e["line"], e["column"]) for e in report["type_errors"]] == [(3, 5)]
    assert len(report["subcalls"]) == 1


def test_the_type_check_option_replaces_the_policy_s(tmp_path):
    program, policy = tmp_path / "bad.py", tmp_path / "enforce.toml"
    program.write_text("import random\nif random.random() > 2:\n    add(a=1, b='x')\n"
                       "print('ran')\n")
    policy.write_text('type_check = "enforce"\n')
    refused = json.loads(codemode("run", str(program), "--builtin", "--json",
                                  "--policy", str(policy)).stdout)
    assert refused["kind"] == "type_error"
    off = codemode("run", str(program), "--builtin", "--json", "--policy", str(policy),
                   "--type-check", "off")
    report = json.loads(off.stdout)
    assert (off.returncode, report["kind"], report["stdout"]) == (0, "ok", "ran\n")
    assert report["type_errors"] == []
    warned = json.loads(codemode("run", str(program), "--builtin", "--json",
                                 "--type-check", "warn").stdout)
    assert warned["kind"] == "ok" and [e["line"] for e in warned["type_errors"]] == [3]
    wrong = codemode("run", str(program), "--builtin", "--type-check", "strict")
    assert wrong.returncode == 2 and b"--type-check must be enforce, warn or off" in wrong.stderr


def test_warn_tells_a_terminal_user_what_it_found(tmp_path):
    program = tmp_path / "w.py"
    program.write_text("import random\nif random.random() > 2:\n    add(a='x', b=1)\n"
                       "print('ran')\n")
    done = codemode("run", str(program), "--builtin", "--type-check", "warn")
    assert (done.returncode, done.stdout) == (0, b"ran\n")
    assert done.stderr.decode().startswith(
        "codemode: warning: the type check found 1 type error(s); the program ran anyway")
    assert "  line 3, column 9: Argument to function `add` is incorrect" in \
        done.stderr.decode()
