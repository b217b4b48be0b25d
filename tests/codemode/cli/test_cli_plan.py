"""`codemode plan PROGRAM` (docs/codemode.md "Plan before the run"): the calls with effects a
program would make, with the policy's decision, and none of them run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TOOLS = '''\
from pathlib import Path
from codemode import tool

SENT = Path(__file__).with_name("sent.txt")

@tool(read_only=True)
def inbox() -> list[str]:
    """The subjects in the inbox."""
    return ["hello", "numbers"]

@tool
def send_email(to: str, body: str) -> str:
    """Send a mail."""
    with SENT.open("a") as f:
        f.write(to + "\\n")
    return "sent"

TOOLS = [inbox, send_email]
'''

PROGRAM = """\
for subject in inbox():
    send_email(to=subject + "@example.com", body="re: " + subject)
"""

POLICY = """\
[[rules]]
tool = "send_email"
action = "ask"
reason = "mail leaves the house"
"""


def codemode(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codemode", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300, check=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "mytools.py").write_text(TOOLS)
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "policy.toml").write_text(POLICY)
    return tmp_path


@pytest.mark.slow
def test_plan_prints_each_send_with_the_policys_decision_and_sends_nothing(
        project: Path) -> None:
    done = codemode("plan", "prog.py", "--tools", "mytools:TOOLS", "--policy", "policy.toml",
                    cwd=project)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        '1. send_email({"body": "re: hello", "to": "hello@example.com"}) -> ask: '
        'mail leaves the house',
        '2. send_email({"body": "re: numbers", "to": "numbers@example.com"}) -> ask: '
        'mail leaves the house',
        "2 call(s) with effects, 2 to approve; the program went on with simulated values, so the "
        "real run may differ"]
    assert not (project / "sent.txt").exists()
    as_json = codemode("plan", "prog.py", "--tools", "mytools:TOOLS", "--json", cwd=project)
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert [(e["tool"], e["decision"]) for e in data["entries"]] == [
        ("send_email", "allow"), ("send_email", "allow")]
    assert data["over_quota"] == [] and "failure" not in data
    assert not (project / "sent.txt").exists()


@pytest.mark.slow
def test_plan_reads_a_program_from_stdin_and_takes_the_runs_limits(project: Path) -> None:
    def plan(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "codemode", "plan", "-", *args],
                              capture_output=True, text=True, cwd=project, timeout=300,
                              input=stdin, check=False)

    from_file = codemode("plan", "prog.py", "--tools", "mytools:TOOLS", "--policy",
                         "policy.toml", cwd=project)
    piped = plan("--tools", "mytools:TOOLS", "--policy", "policy.toml", stdin=PROGRAM)
    assert (piped.returncode, piped.stdout) == (0, from_file.stdout), piped.stderr
    endless = plan("--tools", "mytools:TOOLS", "--timeout", "1",
                   stdin="inbox()\nwhile True:\n    pass\n")
    assert endless.returncode == 1, endless.stderr
    assert "wall-clock limit of 1.0 s" in endless.stdout
    starved = plan("--tools", "mytools:TOOLS", "--fuel", "1", stdin=PROGRAM)
    assert starved.returncode == 1 and "fuel" in starved.stdout, starved.stdout
    bad = plan("--timeout", "0", stdin=PROGRAM)
    assert bad.returncode == 2 and "--timeout must be more than 0" in bad.stderr
    no_server = plan("--mcp", "no-such-command-xyz", stdin=PROGRAM)
    assert no_server.returncode == 2, no_server.stderr
    assert no_server.stderr.startswith("error: McpStartError: ")
    assert not (project / "sent.txt").exists()


@pytest.mark.slow
def test_a_failing_program_prints_what_it_planned_and_exits_1(project: Path) -> None:
    (project / "bad.py").write_text(textwrap.dedent("""\
        send_email(to="a@b.c", body="x")
        raise RuntimeError("boom")
        """))
    done = codemode("plan", "bad.py", "--tools", "mytools:TOOLS", cwd=project)
    assert done.returncode == 1
    assert done.stdout.startswith('1. send_email({"body": "x", "to": "a@b.c"}) -> allow\n'
                                  '1 call(s) with effects before the program failed, 0 to '
                                  'approve; ')
    assert "boom" in done.stdout
    assert not (project / "sent.txt").exists()


@pytest.mark.slow
def test_plan_shows_quota_use_and_exits_3_for_a_plan_past_a_quota(project: Path) -> None:
    (project / "quota.toml").write_text('[[quotas]]\ntool = "send_*"\nper_run = 1\n')
    done = codemode("plan", "prog.py", "--tools", "mytools:TOOLS", "--policy", "quota.toml",
                    cwd=project)
    assert done.returncode == 3, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("-> allow [quota send_* per_run 1/1]")
    assert lines[1].endswith(
        """-> deny: quota exceeded for tool "send_email": quotas[0] ('send_*') allows 1 call """
        "per run, 1 used [quota send_* per_run 1/1 EXCEEDED]")
    assert lines[2].endswith("entry 2 exceeds a quota: the plan cannot be approved")
    as_json = codemode("plan", "prog.py", "--tools", "mytools:TOOLS", "--policy", "quota.toml",
                       "--json", cwd=project)
    assert as_json.returncode == 3, as_json.stderr
    assert json.loads(as_json.stdout)["over_quota"] == [2]
    entries = json.loads(as_json.stdout)["entries"]
    assert [(e["decision"], e["code"]) for e in entries] == [
        ("allow", ""), ("deny", "QUOTA_EXCEEDED")]
    assert entries[1]["quota"] == [{"index": 0, "tool": "send_*", "measure": "per_run",
                                    "used": 1, "limit": 1, "exceeded": True}]
    assert not (project / "sent.txt").exists()


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".jsonl", ".db"])
def test_plan_counts_per_session_quota_use_from_the_runs_log(project: Path,
                                                              suffix: str) -> None:
    (project / "quota.toml").write_text('[[quotas]]\ntool = "send_*"\nper_session = 3\n')
    common = ["--tools", "mytools:TOOLS", "--policy", "quota.toml"]
    ran = codemode("run", "prog.py", *common, "--log", f"s{suffix}", cwd=project)
    assert ran.returncode == 0, ran.stderr                       # 2 of the session's 3 sent
    before = (project / f"s{suffix}").read_bytes()
    fresh = codemode("plan", "prog.py", *common, cwd=project)
    assert fresh.returncode == 0 and "per_session 2/3" in fresh.stdout, fresh.stdout
    counted = codemode("plan", "prog.py", *common, "--log", f"s{suffix}", "--approve",
                       "--out", "a.json", cwd=project)
    assert counted.returncode == 3, counted.stderr                # 3/3, then past it
    assert "per_session 3/3" in counted.stdout and "EXCEEDED" in counted.stdout
    assert not (project / "a.json").exists()
    assert (project / f"s{suffix}").read_bytes() == before       # read, never written
    assert (project / "sent.txt").read_text().count("\n") == 2


@pytest.mark.slow
@pytest.mark.parametrize(("name", "data"), [
    ("notes.jsonl", b"not json at all\nsecond line, important, with no newline"),
    ("random.db", bytes(range(256)) * 16)])
def test_plan_names_the_users_log_when_it_is_not_a_log(project: Path, name: str,
                                                       data: bytes) -> None:
    (project / name).write_bytes(data)
    done = codemode("plan", "prog.py", "--tools", "mytools:TOOLS", "--log", name, cwd=project)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: LogCorruptError: corrupt session log {name}"), \
        done.stderr
    assert "/tmp" not in done.stderr and (project / name).read_bytes() == data


@pytest.mark.slow
def test_plan_counts_from_a_log_whose_last_line_is_being_written(project: Path) -> None:
    ran = codemode("run", "prog.py", "--tools", "mytools:TOOLS", "--log", "s.jsonl",
                   cwd=project)
    assert ran.returncode == 0, ran.stderr
    with (project / "s.jsonl").open("ab") as log:      # a write under way
        log.write(b'{"type":"turn/start","tu')
    before = (project / "s.jsonl").read_bytes()
    done = codemode("plan", "prog.py", "--tools", "mytools:TOOLS", "--log", "s.jsonl",
                    cwd=project)
    assert done.returncode == 0 and done.stderr == "", done.stderr    # no note of a copy
    assert (project / "s.jsonl").read_bytes() == before


@pytest.mark.slow
def test_plan_does_not_overwrite_a_file_that_is_not_an_approval(project: Path) -> None:
    ran = codemode("run", "prog.py", "--tools", "mytools:TOOLS", "--log", "s.db", cwd=project)
    assert ran.returncode == 0, ran.stderr
    (project / "notes.txt").write_text("my notes\n")
    for name in ("prog.py", "s.db", "notes.txt"):      # the program, the log, a user's file
        before = (project / name).read_bytes()
        done = codemode("plan", "prog.py", "--tools", "mytools:TOOLS", "--log", "s.db",
                        "--approve", "--out", name, cwd=project)
        assert done.returncode == 2, done.stderr
        assert done.stderr == (f"error: --out: '{name}' exists and is not a plan approval: "
                               "it is not overwritten (name a new file, or remove it)\n")
        assert done.stdout == "" and (project / name).read_bytes() == before
    for _ in range(2):                                  # an approval is replaced: plan again
        again = codemode("plan", "prog.py", "--tools", "mytools:TOOLS", "--approve", "--out",
                         "a.json", cwd=project)
        assert again.returncode == 0, again.stderr


def test_plan_refuses_an_out_file_in_a_missing_directory_before_the_dry_run(
        project: Path) -> None:
    done = codemode("plan", "prog.py", "--tools", "mytools:TOOLS", "--approve", "--out",
                    "nowhere/a.json", cwd=project)
    assert done.returncode == 2 and "its directory does not exist" in done.stderr
    assert done.stdout == ""                                     # no plan: nothing ran


@pytest.mark.slow
def test_plan_marks_a_destructive_entry(project: Path) -> None:
    (project / "wipe.py").write_text(
        "from codemode import tool\n\n@tool(destructive=True, idempotent=True)\n"
        "def wipe(folder: str) -> str:\n    \"\"\"Wipe a folder.\"\"\"\n    return folder\n\n"
        "TOOLS = [wipe]\n")
    (project / "wipe_prog.py").write_text('wipe(folder="tmp")\n')
    done = codemode("plan", "wipe_prog.py", "--tools", "wipe:TOOLS", cwd=project)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (
        '1. wipe({"folder": "tmp"}) -> allow [destructive] [idempotent]')
    as_json = codemode("plan", "wipe_prog.py", "--tools", "wipe:TOOLS", "--json", cwd=project)
    [entry] = json.loads(as_json.stdout)["entries"]
    assert (entry["destructive"], entry["idempotent"]) == (True, True)


GUARDED = """\
for subject in inbox():
    try:
        send_email(to=subject + "@example.com", body="re: " + subject)
    except ToolDenied as exc:
        print("not sent:", exc.message)
"""


@pytest.mark.slow
def test_an_approval_written_by_plan_runs_each_approved_send_once_without_asking(
        project: Path) -> None:
    (project / "guarded.py").write_text(GUARDED)
    common = ["--tools", "mytools:TOOLS", "--policy", "policy.toml"]
    made = codemode("plan", "guarded.py", *common, "--approve", "--deny", "2:not numbers",
                    "--out", "ok.json", cwd=project)
    assert made.returncode == 0, made.stderr
    assert "1 approved, 1 denied" in made.stderr
    assert not (project / "sent.txt").exists()
    approval = json.loads((project / "ok.json").read_text())
    assert [(e["n"], e["approved"], e["reason"]) for e in approval["entries"]] == [
        (1, True, ""), (2, False, "not numbers")]

    # changed after it was sealed, or given for another program: refused, nothing runs
    forged = {**approval, "entries": [{**e, "approved": True} for e in approval["entries"]]}
    (project / "forged.json").write_text(json.dumps(forged))
    refused = codemode("run", "guarded.py", *common, "--log", "a.jsonl",
                       "--approval", "forged.json", cwd=project)
    assert refused.returncode == 2, refused.stderr
    assert "was changed after it was given" in refused.stderr
    (project / "other.py").write_text(GUARDED.replace("re: ", "fw: "))
    other = codemode("run", "other.py", *common, "--log", "b.jsonl", "--approval", "ok.json",
                     cwd=project)
    assert other.returncode == 2, other.stderr
    assert "is for another program" in other.stderr
    # the program in the file changed: the same refusal, which says it may be the file
    edited = {**approval, "code": approval["code"].replace("re: ", "fw: ")}
    (project / "edited.json").write_text(json.dumps(edited))
    changed = codemode("run", "guarded.py", *common, "--log", "b.jsonl", "--approval",
                       "edited.json", cwd=project)
    assert changed.returncode == 2 and "or the file was changed" in changed.stderr
    assert not (project / "sent.txt").exists()

    ran = codemode("run", "guarded.py", *common, "--log", "c.jsonl", "--approval", "ok.json",
                   cwd=project)
    assert ran.returncode == 0, ran.stderr               # it did not pause (3)
    assert (project / "sent.txt").read_text() == "hello@example.com\n"
    assert ran.stdout.startswith('not sent: the user rejected tool "send_email": not numbers '
                                 f"(plan approval {approval['id']}, entry 2)")
    shown = codemode("log", "show", "c.jsonl", cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert f"approval: allowed-once by plan approval {approval['id']}, entry 1" in shown.stdout
    assert f"approval: rejected by plan approval {approval['id']}, entry 2" in shown.stdout


@pytest.mark.slow
def test_an_approval_is_not_written_without_a_usable_seal_key_or_for_an_unknown_entry(
        project: Path) -> None:
    common = ["prog.py", "--tools", "mytools:TOOLS", "--policy", "policy.toml", "--approve"]
    weak = subprocess.run([sys.executable, "-m", "codemode", "plan", *common,
                           "--out", "a.json"], capture_output=True, text=True, cwd=project,
                          timeout=300, check=False,
                          env={**os.environ, "CODEMODE_SEAL_KEY": "short"})
    assert weak.returncode == 2, weak.stderr
    assert "cannot seal the approval" in weak.stderr and "CODEMODE_SEAL_KEY" in weak.stderr
    unknown = codemode("plan", *common, "--deny", "7", "--out", "a.json", cwd=project)
    assert unknown.returncode == 2, unknown.stderr
    assert "entries [7] are not entries the policy asks about" in unknown.stderr
    no_out = codemode("plan", *common, cwd=project)
    assert no_out.returncode == 2 and "--approve needs --out" in no_out.stderr
    assert not (project / "a.json").exists() and not (project / "sent.txt").exists()


def _on_terminal(args: list[str], answer: bytes, cwd: Path) -> tuple[int, str, str]:
    """`codemode ARGS` with a terminal (a pseudo-terminal) as stdin, `answer` typed on it
    (waiting in the terminal's buffer until the command reads it)."""
    main, other = os.openpty()
    try:
        done = subprocess.Popen([sys.executable, "-m", "codemode", *args], stdin=other,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
        os.close(other)
        os.write(main, answer)
        out, err = done.communicate(timeout=300)
    finally:
        os.close(main)
    return done.returncode, out.decode(), err.decode()


@pytest.mark.slow
def test_plan_first_asks_once_on_a_terminal_and_runs_each_approved_send_once(
        project: Path) -> None:
    run = ["run", "prog.py", "--tools", "mytools:TOOLS", "--policy", "policy.toml",
           "--log", "a.jsonl", "--plan-first"]
    piped = codemode(*run, cwd=project)
    assert piped.returncode == 2 and "stdin is not one" in piped.stderr
    status, _, err = _on_terminal(run, b"n\n", project)
    assert status == 1 and err.count("[y/N]") == 1 and "not approved: nothing ran" in err
    assert not (project / "sent.txt").exists()
    status, _, err = _on_terminal([*run[:-3], "--log", "b.jsonl", "--plan-first"],
                                  b"y\n", project)
    assert status == 0, err                                  # it did not pause
    assert "Approve these 2 call(s), each to run once? [y/N]" in err
    assert err.count("[y/N]") == 1
    assert (project / "sent.txt").read_text() == "hello@example.com\nnumbers@example.com\n"
