"""The command line, run as a user would: a real subprocess, with pipes, or with a
pseudo-terminal where the behaviour depends on one."""

import itertools
import json
import os
import pty
import subprocess
import sys
import threading
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
POLICIES = ROOT / "fixtures" / "policies"
REPORT_FIELDS = ["ok", "kind", "code", "limit", "stdout", "stderr", "value",
                 "error", "subcalls", "duration_s", "limits", "run_id", "approvals", "labels",
                 "warnings", "cut", "type_errors"]
SUBCALL_FIELDS = ["n", "id", "tool", "arguments", "ok", "code", "denied", "text",
                  "duration_ms", "replayed_from"]


def codemode(*args, timeout=120, stdin=None, columns=250):
    """Run the CLI with every stream a pipe; bytes in and out."""
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "codemode", *args], capture_output=True,
                          input=stdin, timeout=timeout, cwd=ROOT, env=env)


def codemode_on_a_terminal(*args, stdout_tty=False, timeout=120):
    """Run the CLI with stderr (and, with `stdout_tty`, stdout) on a pseudo-terminal.

    Returns (exit status, stdout bytes, terminal bytes with "\\r\\n" made "\\n")."""
    env = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1", "TERM": "dumb"}
    terminal, child_end = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "codemode", *args], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, stderr=child_end,
                            stdout=child_end if stdout_tty else subprocess.PIPE)
    os.close(child_end)
    chunks = []

    def read_terminal():
        while True:
            try:
                data = os.read(terminal, 65536)
            except OSError:                 # EIO: every writer has closed it
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read_terminal)
    reader.start()
    out = b"" if stdout_tty else proc.stdout.read()
    status = proc.wait(timeout=timeout)
    reader.join(timeout=timeout)
    os.close(terminal)
    return status, out, b"".join(chunks).replace(b"\r\n", b"\n")


def program(tmp_path, text, name="p.py"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def report(done):
    # --json: the report alone on stdout; stderr holds at most the one-time progress lines of
    # building or compiling the component (a cold cache, e.g. the first fuel-metered run).
    progress = [line for line in done.stderr.decode().splitlines()
                if not line.startswith(("codemode: building", "codemode: compiling"))]
    assert progress == [], done.stderr.decode()
    data = json.loads(done.stdout)
    assert list(data) == REPORT_FIELDS
    for row in data["subcalls"]:
        assert list(row) == SUBCALL_FIELDS
    return data


# ---- help, version, usage ------------------------------------------------------------------

def test_help_lists_the_commands():
    done = codemode("--help")
    assert done.returncode == 0
    assert all(name in done.stdout.decode() for name in ("run", "demo", "eval"))


def test_version():
    done = codemode("--version")
    assert done.returncode == 0
    assert done.stdout.decode() == f"codemode {metadata.version('codemode')}\n"


def _panel_text(help_text):
    """The help's words in reading order, box drawing removed: a cell's continuation lines
    hold only that cell's text, so each option's help reads as one run of words."""
    lines = [line.strip().strip("│╭╮╰╯─").strip() for line in help_text.splitlines()]
    return " ".join(" ".join(lines).split())


@pytest.mark.parametrize("command", ["run", "resume", "eval", "demo", "serve", "log show"])
def test_help_at_80_columns_keeps_every_sentence_whole(command):
    import typer

    from codemode.cli import app

    done = codemode(*command.split(), "--help", columns=80)
    assert done.returncode == 0
    text = done.stdout.decode()
    assert "<bool>" not in text                                 # flags take no value
    assert max(len(line) for line in text.splitlines()) <= 80
    words = _panel_text(text)
    click_command = typer.main.get_command(app)
    for name in command.split():
        click_command = click_command.commands[name]
    for paragraph in click_command.help.split("\n\n"):
        assert " ".join(paragraph.split()) in words
    for param in click_command.params:
        if param.help:
            assert param.help.endswith("."), param.name
            assert " ".join(param.help.split()) in words, param.name


@pytest.mark.parametrize("group", [(), ("log",)])
def test_command_lists_at_80_columns_keep_each_summary_whole(group):
    import typer

    from codemode.cli import app

    done = codemode(*group, "--help", columns=80)
    assert done.returncode == 0
    text = done.stdout.decode()
    assert "<bool>" not in text
    words = _panel_text(text)
    click_group = typer.main.get_command(app)
    for name in group:
        click_group = click_group.commands[name]
    for name, command in click_group.commands.items():
        assert f"{name} {command.get_short_help_str(limit=1000)}" in words, name
    # Each summary is wrapped, not broken early where its docstring breaks a line: no line
    # of the Commands panel ends where the next line's first word would still have fit.
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("╭─ Commands"))
    cells = [line[1:-1] for line in lines[start + 1:] if line.startswith("│")]
    offset = len(cells[0]) - len(cells[0].lstrip()[len(cells[0].split()[0]):].lstrip())
    width = len(cells[0]) - offset - 1
    for line, following in itertools.pairwise(cells):
        if following[:offset].strip():                      # the next command's first line
            continue
        assert len(line[offset:].rstrip()) + 1 + len(following.split()[0]) > width, line


def test_a_flag_takes_no_value(tmp_path):
    done = codemode("run", program(tmp_path, "1\n"), "--builtin", "true")
    assert done.returncode == 2
    assert b"Got unexpected extra argument(s) (true)" in done.stderr


def test_missing_program_is_a_usage_error(tmp_path):
    done = codemode("run", str(tmp_path / "nope.py"))
    assert done.returncode == 2
    assert b"does not exist" in done.stderr


def test_a_program_that_is_not_utf8_is_a_clear_error(tmp_path):
    path = tmp_path / "latin1.py"
    path.write_bytes(b"print('caf\xe9')\n")
    done = codemode("run", str(path))
    assert done.returncode == 2
    assert b"latin1.py is not valid UTF-8 (byte 10); save the program as UTF-8" in done.stderr


@pytest.mark.parametrize("source", ["/dev/zero", "-"])
def test_a_program_larger_than_any_limit_is_a_usage_error_not_read_whole(source):
    # /dev/zero never ends, and `yes` on stdin neither: at most 64 MiB + 1 byte is read.
    if source == "-":
        yes = subprocess.Popen(["yes"], stdout=subprocess.PIPE)
        try:
            done = subprocess.run([sys.executable, "-m", "codemode", "run", "-"],
                                  stdin=yes.stdout, capture_output=True, timeout=120, cwd=ROOT)
        finally:
            yes.kill()
            yes.wait()
        where = b"stdin"
    else:
        done = codemode("run", source)
        where = source.encode()
    assert done.returncode == 2
    assert done.stderr.strip().endswith(where + b" is larger than 64 MiB, the most a "
                                        b"program may be")


def test_a_program_over_the_policys_code_bytes_is_refused_unrun(tmp_path):
    policy = tmp_path / "small.toml"
    policy.write_text("[limits]\ncode_bytes = 64\n")
    program = tmp_path / "long.py"
    program.write_text("print('ran')\n" + "# padding\n" * 10)
    done = codemode("run", str(program), "--policy", str(policy), "--json")
    data = report(done)
    assert (done.returncode, data["kind"], data["code"], data["limit"]) == (1, "limit", "size",
                                                                           "code")
    assert data["stdout"] == "" and data["limits"]["code_bytes"] == 64
    assert data["error"]["message"] == ("the program is 113 bytes, over its limit of 64 bytes "
                                        "(code_bytes)")


@pytest.mark.parametrize("option, value, bound", [
    ("--timeout", "inf", "more than 0 and at most 86400 seconds (a day)"),
    ("--timeout", "0", "more than 0 and at most 86400 seconds (a day)"),
    ("--memory-mb", "8", "between 16 and 4096 MiB"),
    ("--fuel", "0", "a positive number"),
])
def test_limits_out_of_range_name_the_option(tmp_path, option, value, bound):
    done = codemode("run", program(tmp_path, "1\n"), option, value)
    assert done.returncode == 2
    assert f"Error: Invalid value: {option} must be {bound}\n".encode() in done.stderr


def test_a_usage_error_is_one_unwrapped_line_when_stderr_is_not_a_terminal(tmp_path):
    long_option = "--an-option-whose-name-is-long-enough-to-pass-eighty-columns-" + "x" * 30
    done = codemode("run", program(tmp_path, "1\n"), long_option)
    assert done.returncode == 2
    assert f"Error: No such option: {long_option}\n".encode() in done.stderr
    assert "╭".encode() not in done.stderr        # no panel drawn around it


@pytest.mark.parametrize("given, suggested", [
    ("--bogus", None), ("--x", None), ("--timout", "--timeout"), ("--polcy", "--policy"),
    ("--lg", "--log"),
])
def test_an_unknown_option_suggests_only_close_ones(tmp_path, given, suggested):
    done = codemode("run", program(tmp_path, "1\n"), given, "3")
    assert done.returncode == 2
    said = f" (Possible options: {suggested})" if suggested else ""
    assert f"Error: No such option: {given}{said}\n".encode() in done.stderr


def test_mcp_server_that_cannot_start_is_a_clear_error(tmp_path):
    done = codemode("run", program(tmp_path, "1\n"), "--mcp", "definitely-not-a-command-xyz",
                    timeout=60)
    assert done.returncode == 2
    assert b"definitely-not-a-command-xyz" in done.stderr


# ---- output that composes -------------------------------------------------------------------

PRINTS = ("import sys\n"
          "print('x' * 200)\n"
          "print('tab\\there, caf\\u00e9, \\x1b[31mred\\x1b[0m')\n"
          "print('warned', file=sys.stderr)\n"
          "sys.stdout.write('no newline at the end')\n"
          "add(a=1, b=2)\n")
PRINTED = ("x" * 200 + "\n" + "tab\there, caf\u00e9, \x1b[31mred\x1b[0m\n"
           + "no newline at the end").encode()


def test_piped_output_is_exactly_what_the_program_printed(tmp_path):
    done = codemode("run", program(tmp_path, PRINTS), "--builtin", columns=80)
    assert done.returncode == 0
    assert done.stdout == PRINTED                 # no box, no wrapping, no escaping
    assert done.stderr == b"warned\n"             # no card: stderr is not a terminal


def test_a_failed_run_keeps_its_output_and_says_why_on_stderr(tmp_path):
    source = "print('before')\nx = 1\nraise ValueError('broken')\n"
    done = codemode("run", program(tmp_path, source))
    assert done.returncode == 1
    assert done.stdout == b"before\n"
    assert done.stderr.decode() == (
        "codemode: code run failed (exception): broken\n"
        "Traceback (most recent call last):\n"
        '  File "<program>", line 3, in <module>\n'
        "    raise ValueError('broken')\n"
        "ValueError: broken\n")


def test_the_program_can_come_from_stdin():
    done = codemode("run", "-", stdin=b"print('from stdin')\n")
    assert done.returncode == 0
    assert done.stdout == b"from stdin\n"


def test_the_card_is_drawn_on_stderr_when_it_is_a_terminal(tmp_path):
    status, out, terminal = codemode_on_a_terminal("run", program(tmp_path, PRINTS),
                                                   "--builtin")
    assert status == 0
    assert out == PRINTED                         # stdout is still a pipe: untouched
    text = terminal.decode()
    assert text.startswith("warned\n")            # the program's stderr, then the card
    assert "run_code: p.py" in text
    assert "│ 3.0" in text                         # the final value
    assert "sub-calls" in text and "│ add " in text
    assert text.rstrip().endswith("1 sub-call(s), 0 failed")


def test_no_table_keeps_a_terminal_free_of_the_card(tmp_path):
    status, out, terminal = codemode_on_a_terminal("run", program(tmp_path, PRINTS),
                                                   "--builtin", "--no-table")
    assert (status, out, terminal) == (0, PRINTED, b"warned\n")


def test_table_draws_the_card_into_a_pipe(tmp_path):
    done = codemode("run", program(tmp_path, PRINTS), "--builtin", "--table")
    assert done.stdout == PRINTED
    stderr = done.stderr.decode()
    assert stderr.startswith("warned\n╭─ run_code: p.py ")
    assert stderr.endswith("1 sub-call(s), 0 failed\n")


def test_control_sequences_are_made_visible_on_a_terminal(tmp_path):
    code = ("import sys\nprint('\\x1b[31mRED\\x1b]0;title\\x07')\n"
            "print('\\u202eevil', file=sys.stderr)\n'\\x1b[2J'\n")
    status, _, terminal = codemode_on_a_terminal("run", program(tmp_path, code),
                                                 stdout_tty=True)
    assert status == 0
    assert b"\x1b[31m" not in terminal and b"\x1b]0" not in terminal
    assert b"\x1b[2J" not in terminal and "\u202e".encode() not in terminal
    text = terminal.decode()
    assert text.startswith("\\x1b[31mRED\\x1b]0;title\\x07\n\\u202eevil\n")
    assert "│ \\x1b[2J" in text                    # the final value, on the card


# ---- --json ---------------------------------------------------------------------------------

def test_json_of_a_completed_run(tmp_path):
    done = codemode("run", program(tmp_path, "print('hi')\n[add(a=1, b=2), add(a=3, b=4)]\n"),
                    "--builtin", "--json")
    assert done.returncode == 0
    data = report(done)
    assert {k: data[k] for k in ("ok", "kind", "code", "limit", "stdout", "stderr", "value",
                                 "error")} == {
        "ok": True, "kind": "ok", "code": None, "limit": None, "stdout": "hi\n",
        "stderr": "", "value": [3, 7], "error": None}
    first, second = data["subcalls"]
    assert first["id"].endswith(":code:1") and second["id"].endswith(":code:2")
    assert {k: first[k] for k in ("n", "tool", "arguments", "ok", "code", "denied", "text")} == {
        "n": 1, "tool": "add", "arguments": {"a": 1, "b": 2}, "ok": True, "code": None,
        "denied": False, "text": "3.0"}
    assert second["n"] == 2 and second["text"] == "7.0"
    assert data["duration_s"] > 0
    assert data["limits"]["wall_clock_s"] == 10.0 and data["limits"]["fuel"] is None


def test_json_of_a_program_error(tmp_path):
    done = codemode("run", program(tmp_path, "print('so far')\nraise KeyError('k')\n"), "--json")
    assert done.returncode == 1
    data = report(done)
    assert {k: data[k] for k in ("ok", "kind", "code", "limit", "stdout", "value")} == {
        "ok": False, "kind": "program_error", "code": "exception", "limit": None,
        "stdout": "so far\n", "value": None}
    assert data["error"] == {
        "type": "KeyError", "message": "'k'",
        "traceback": ('Traceback (most recent call last):\n'
                      '  File "<program>", line 2, in <module>\n'
                      "    raise KeyError('k')\n"
                      "KeyError: 'k'\n")}


def _limits_policy(tmp_path, **limits):
    lines = ["[limits]", *(f"{key} = {value}" for key, value in limits.items())]
    return program(tmp_path, "\n".join(lines) + "\n", name="limits.toml")


@pytest.mark.parametrize("limit, code, source, options", [
    ("time", "timeout", "while True:\n    pass\n", ["--timeout", "1"]),
    ("fuel", "fuel", "while True:\n    pass\n", ["--fuel", "1000000"]),
    ("memory", "memory", "s = 'x' * 10**6\nwhile True:\n    s = s + s\n",
     ["--memory-mb", "32"]),
    ("output", "output", "while True:\n    print('x' * 100)\n", ["--policy", "output_bytes"]),
    ("subcalls", "subcalls", "while True:\n    add(a=1, b=2)\n", ["--policy", "max_subcalls"]),
])
def test_json_of_each_limit(tmp_path, limit, code, source, options):
    if options[0] == "--policy":
        options = ["--policy", _limits_policy(tmp_path, **{options[1]: 50})]
    done = codemode("run", program(tmp_path, source), "--builtin", "--json", *options)
    assert done.returncode == 1
    data = report(done)
    assert (data["ok"], data["kind"], data["code"], data["limit"]) == (False, "limit", code,
                                                                       limit)
    assert data["error"]["message"]
    if limit == "subcalls":
        assert len(data["subcalls"]) == 50 and all(row["ok"] for row in data["subcalls"])


@pytest.mark.parametrize("refused", [["--approval", "a.json"], ["--tools", "nosuch:TOOLS"],
                                     ["--mcp", "/no/such/server"]])
def test_json_of_a_run_refused_before_it_starts_is_nothing_on_stdout(tmp_path, refused):
    done = codemode("run", program(tmp_path, "1\n"), "--json", *refused)
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr.startswith(b"error: ") and b"Traceback" not in done.stderr


def test_json_of_a_denied_subcall(tmp_path):
    code = ("try:\n    get_weather(city='Atlantis')\nexcept ToolDenied as exc:\n"
            "    print(exc.code, exc.message)\nget_weather(city='Paris')['city']\n")
    done = codemode("run", program(tmp_path, code), "--builtin", "--json",
                    "--log", str(tmp_path / "s.jsonl"), "--policy", str(POLICIES / "example.toml"))
    assert done.returncode == 0
    data = report(done)
    assert (data["ok"], data["kind"], data["value"]) == (True, "ok", "Paris")
    assert data["stdout"] == "DENIED no weather for fictional cities\n"
    denied, allowed = data["subcalls"]
    assert {k: denied[k] for k in ("tool", "arguments", "ok", "code", "denied", "text")} == {
        "tool": "get_weather", "arguments": {"city": "Atlantis"}, "ok": False,
        "code": "DENIED", "denied": True, "text": "Error: no weather for fictional cities"}
    assert (allowed["ok"], allowed["code"], allowed["denied"]) == (True, None, False)


def test_json_names_the_code_of_every_failed_subcall(tmp_path):
    code = ("for call in (lambda: add(a='x', b=1), lambda: fail(message='boom'),\n"
            "             lambda: call_tool('nope')):\n"
            "    try:\n        call()\n    except ToolCallError as exc:\n"
            "        print(exc.code)\n")
    # the type check would refuse add(a='x') before the run: these are the run's own codes
    done = codemode("run", program(tmp_path, code), "--builtin", "--json", "--type-check", "off")
    data = report(done)
    assert data["stdout"] == "INVALID_ARGS\nTOOL_ERROR\nUNKNOWN_TOOL\n"
    assert [(row["tool"], row["code"], row["denied"]) for row in data["subcalls"]] == [
        ("add", "INVALID_ARGS", False), ("fail", "TOOL_ERROR", False),
        ("nope", "UNKNOWN_TOOL", False)]


# ---- policies and limits --------------------------------------------------------------------

@pytest.mark.parametrize("name", ["default", "strict", "example"])
@pytest.mark.parametrize("tools", [[], ["--builtin"]])
def test_the_shipped_policies_run_with_and_without_the_builtin_tools(tmp_path, name, tools):
    # the example's ask rule pauses a run calling sleep_ms (a --builtin tool): that needs a log
    log = ["--log", str(tmp_path / "s.jsonl")] if name == "example" and tools else []
    done = codemode("run", program(tmp_path, "print('ok')\n"), *tools, *log,
                    "--policy", str(POLICIES / f"{name}.toml"))
    assert done.returncode == 0, done.stderr.decode()
    assert (done.stdout, done.stderr) == (b"ok\n", b"")


def _limits_of(tmp_path, *options):
    done = codemode("run", program(tmp_path, "1\n"), "--json", *options)
    assert done.returncode == 0, done.stderr.decode()
    return report(done)["limits"]


def test_options_replace_the_limits_of_a_policy(tmp_path):
    policy = _limits_policy(tmp_path, wall_clock_s=3, memory_bytes=64 << 20, fuel=10**9,
                            max_subcalls=5)
    limits = _limits_of(tmp_path, "--policy", policy, "--timeout", "1.5", "--memory-mb", "128",
                        "--fuel", "123456789")
    assert (limits["wall_clock_s"], limits["memory_bytes"], limits["fuel"],
            limits["max_subcalls"]) == (1.5, 128 << 20, 123456789, 5)
    limits = _limits_of(tmp_path, "--policy", policy)
    assert (limits["wall_clock_s"], limits["memory_bytes"], limits["fuel"]) == (
        3.0, 64 << 20, 10**9)


def test_a_policy_without_limits_keeps_the_defaults_and_the_options(tmp_path):
    policy = program(tmp_path, 'tier = "wasm"\n', name="nolimits.toml")
    assert _limits_of(tmp_path, "--policy", policy) == _limits_of(tmp_path)
    assert _limits_of(tmp_path, "--policy", policy, "--timeout", "1")["wall_clock_s"] == 1.0


@pytest.mark.slow
def test_a_policy_timeout_is_replaced_by_the_option_in_the_run_itself(tmp_path):
    policy = program(tmp_path, 'tier = "wasm"\n', name="nolimits.toml")
    done = codemode("run", program(tmp_path, "while True:\n    pass\n"), "--json",
                    "--policy", policy, "--timeout", "1")
    data = report(done)
    assert data["limit"] == "time"
    assert data["error"]["message"] == "the run exceeded its wall-clock limit of 1.0 s"


# ---- the session log ------------------------------------------------------------------------

def test_demo_runs_on_the_builtin_toolset(tmp_path):
    log = tmp_path / "demo.jsonl"
    done = codemode("demo", "--log", str(log))
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == (
        "ada@example.com has 3 orders\n"
        "open orders total: 155.50\n"
        "lookup failed as expected: no order 'ord-9999'\n")
    assert "1 sub-call(s)" not in done.stderr.decode()
    assert done.stderr.decode().rstrip().endswith("8 sub-call(s), 1 failed")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    types = [line["type"] for line in lines]
    assert types.count("tool/call") == types.count("tool/result") == 1
    assert types.count("tool/code-dispatch-start") == types.count("tool/code-dispatch") == 8
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.jsonl"]   # no .lock left


def test_reusing_a_log_file_reports_only_this_run(tmp_path):
    path = program(tmp_path, "add(a=1, b=2)\n")
    log = tmp_path / "session.db"
    for _ in range(2):
        done = codemode("run", path, "--builtin", "--log", str(log), "--json")
        assert done.returncode == 0, done.stderr
        assert len(report(done)["subcalls"]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.py", "session.db"]


LOG_COMMANDS = [["run", "PROGRAM"], ["demo"], ["serve", "--builtin"], ["plan", "PROGRAM"]]


@pytest.mark.parametrize("command", LOG_COMMANDS)
def test_a_log_in_a_missing_directory_is_refused(tmp_path, command):
    log = tmp_path / "missing" / "session.jsonl"
    argv = [program(tmp_path, "1\n") if arg == "PROGRAM" else arg for arg in command]
    done = codemode(*argv, "--log", str(log))
    assert done.returncode == 2
    assert f"Invalid value for '--log': directory '{log.parent}' does not exist." in \
        " ".join(done.stderr.decode().split())
    assert not log.parent.exists()


@pytest.mark.parametrize("command", [*LOG_COMMANDS, ["resume"]])
@pytest.mark.parametrize("name", ["session.txt", "session", "logs.db", "fifo.jsonl", "fifo.db"])
def test_a_log_of_no_known_type_is_refused_before_anything_runs(tmp_path, command, name):
    # a FIFO would wait for a writer for good: refused, and nothing hangs
    log = tmp_path / name
    if name == "logs.db":
        log.mkdir()
    elif name.startswith("fifo"):
        os.mkfifo(log)
    argv = [program(tmp_path, "print('ran')\n") if arg == "PROGRAM" else arg
            for arg in command]
    done = (codemode("resume", str(log), "run-1") if command == ["resume"] else
            codemode(*argv, "--log", str(log), timeout=60))
    assert done.returncode == 2
    said = " ".join(done.stderr.decode().split())
    where = "'LOG'" if command == ["resume"] else "'--log'"
    assert f"Invalid value for {where}: " + (
        f"{log} is a directory, not a log file" if name == "logs.db" else
        f"session log {log} is not a regular file" if name.startswith("fifo") else
        f"unknown session log type '{log}': use .db/.sqlite (SQLite) or .jsonl") in said
    assert "ValueError" not in said
    assert b"ran" not in done.stdout and "╭─ program" not in said   # nothing ran or shown
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "p.py") == (
        [name] if name == "logs.db" or name.startswith("fifo") else [])


def test_a_log_another_session_is_writing_is_refused(tmp_path):
    from codemode.pipeline import open_log

    log = tmp_path / "session.jsonl"
    with open_log(str(log)):
        done = codemode("run", program(tmp_path, "1\n"), "--log", str(log))
    assert done.returncode == 2
    assert b"LogInUseError: session log" in done.stderr
    assert b"is in use by another session or process" in done.stderr


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_log_that_cannot_be_created_is_one_line_that_names_it(tmp_path):
    done = codemode("run", program(tmp_path, "1\n"), "--log", "/proc/session.db")
    assert done.returncode == 2
    assert done.stderr.decode().startswith(
        "error: LogError: session log /proc/session.db cannot be opened for writing: ")
    assert b"FileNotFoundError" not in done.stderr and b"Traceback" not in done.stderr


def test_the_sub_call_table_says_why_each_call_failed(tmp_path):
    source = ("for call in (lambda: get_order(order_id='ord-9999'), lambda: call_tool('nope'),\n"
              "             lambda: add(a='x', b=1)):\n"
              "    try:\n        call()\n    except ToolCallError:\n        pass\n")
    done = codemode("run", program(tmp_path, source), "--builtin", "--table",
                    "--type-check", "off")
    shown = done.stderr.decode()
    assert done.returncode == 0, shown
    assert "TOOL_ERROR: Error: no order 'ord-9999'" in shown
    assert 'UNKNOWN_TOOL: Error: unknown tool "nope"' in shown
    assert "INVALID_ARGS: Error: invalid arguments" in shown


@pytest.mark.log_unchecked("a log left with its turn open on purpose")
def test_log_check_reports_violations_and_exit_status(tmp_path):
    from codemode.pipeline import events, open_log

    sound = tmp_path / "sound.jsonl"
    done = codemode("run", str(ROOT / "fixtures" / "demo_program.py"), "--builtin",
                    "--log", str(sound))
    assert done.returncode == 0, done.stderr
    checked = codemode("log", "check", str(sound))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.decode().strip().endswith("events, no violations")

    open_turn = tmp_path / "open.db"                       # left open, as by a crash
    with open_log(open_turn) as log:
        log.append(events.TurnStart(turn=1))
    checked = codemode("log", "check", str(open_turn))
    assert checked.returncode == 1
    assert checked.stdout.decode().splitlines() == [
        "seq 1: UNCLOSED_TURN: the log ends with turn 1 open"]
    assert codemode("log", "check", "--partial", str(open_turn)).returncode == 0
    assert b"note:" not in checked.stderr                  # nobody writes it

    with open_log(open_turn) as log:                       # a session writing it now
        log.append(events.TurnStart(turn=2))
        checked = codemode("log", "check", str(open_turn))
        assert checked.returncode == 1
        assert b"a session may be writing this log" in checked.stderr
        assert b"--partial" in checked.stderr
        assert codemode("log", "check", "--partial", str(open_turn)).returncode == 0

    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("not a log\n")
    unreadable = codemode("log", "check", str(garbage))
    assert unreadable.returncode == 2 and b"corrupt session log" in unreadable.stderr

    torn = tmp_path / "torn.jsonl"                         # a writer died mid-append
    torn.write_bytes(sound.read_bytes() + b'{"type":"turn/sta')
    for command in ("check", "show"):
        read = codemode("log", command, str(torn))
        assert read.returncode == 0, (command, read.stderr)
        assert b"the last line (17 bytes) is torn and was left out" in read.stderr, command
    assert b"is torn" not in codemode("log", "check", str(sound)).stderr


@pytest.mark.parametrize("suffix", [".jsonl", ".db"])
def test_a_run_refused_before_it_starts_leaves_no_empty_log(tmp_path, suffix):
    policy = tmp_path / "p.toml"
    policy.write_text('[[rules]]\ntool = "nope_tool"\naction = "deny"\n')
    log = tmp_path / f"new{suffix}"
    done = codemode("run", str(ROOT / "fixtures" / "demo_program.py"), "--builtin",
                    "--policy", str(policy), "--log", str(log))
    assert done.returncode == 2 and b"PolicyError" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.toml"]
    kept = tmp_path / f"kept{suffix}"                       # a log that was there stays
    assert codemode("run", str(ROOT / "fixtures" / "demo_program.py"), "--builtin",
                    "--log", str(kept)).returncode == 0
    before = kept.read_bytes()
    codemode("run", str(ROOT / "fixtures" / "demo_program.py"), "--builtin",
             "--policy", str(policy), "--log", str(kept))
    assert kept.read_bytes() == before


def test_the_command_freezes_its_objects_for_the_exit_after_closing_its_log(tmp_path):
    # `main` ends with gc.freeze(), after the session and its log are closed and the output
    # flushed: the exit's collections skip every object, atexit handlers still run after it
    log = tmp_path / "run.jsonl"
    path = program(tmp_path, "print(1)\n")
    probe = ("import atexit, gc, sys\n"
             "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0,"
             " file=sys.stderr))\n"
             f"sys.argv = ['codemode', 'run', {path!r}, '--builtin',"
             f" '--log', {str(log)!r}]\n"
             "from codemode.cli import main\nmain()")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"1\n"
    assert done.stderr == b"frozen True\n"
    checked = codemode("log", "check", str(log))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.decode().strip().endswith("events, no violations")
