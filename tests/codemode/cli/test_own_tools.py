"""`--tools MODULE:ATTR`: the user's own tools for `run`, `resume`, `serve`, `describe` and
`eval`, imported from the working directory as `python -m` does; a spec that names no
tools is a usage error on one line (exit 2)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MODULE = '''
from codemode import tool

@tool
def shout(text: str) -> str:
    """Upper-case a text and add an exclamation mark."""
    return text.upper() + "!"

@tool
def secret_code() -> str:
    """A tool the policy keeps from programs."""
    return "s3cr3t"

TOOLS = [shout, secret_code]
ONE = shout
NOT_A_TOOL = "shout"
BROKEN = [shout, "secret_code"]
NO_TOOLS = []
NO_TOOLS_EITHER = ()

def make():
    return [shout]

def make_none():
    return []

def plain(text):
    return text
'''


def codemode(*args: str, cwd: Path, stdin: str | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, "-m", "codemode", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, input=stdin, timeout=timeout)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A directory as a user has it: a tools module and a program beside it."""
    (tmp_path / "mytools.py").write_text(MODULE)
    (tmp_path / "prog.py").write_text('print(shout(text="hello"))\n')
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("attr", ["TOOLS", "ONE", "make"])
def test_run_offers_the_tools_a_spec_names(project, attr):
    done = codemode("run", "prog.py", "--tools", f"mytools:{attr}", cwd=project)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "HELLO!\n"


@pytest.mark.parametrize("spec, message", [
    ("nomodule:TOOLS", "error: --tools: no module named 'nomodule' (looked in {cwd} and on "
                       "sys.path)"),
    ("mytools:MISSING", "error: --tools: 'mytools' has no attribute 'MISSING'"),
    ("mytools:NOT_A_TOOL", "error: --tools: mytools:NOT_A_TOOL is a str, not a tool, a list "
                           "of tools or a function of no arguments returning them"),
    ("mytools:BROKEN", "error: --tools: mytools:BROKEN[1] is a str, not a tool (decorate the "
                       "function with @codemode.tool)"),
    ("mytools:plain", "error: --tools: mytools:plain is a function of arguments (text), not "
                      "a tool: decorate it with @codemode.tool, or name a list of tools or a "
                      "function of no arguments returning them"),
    ("mytools:NO_TOOLS", "error: --tools: mytools:NO_TOOLS names no tools: "
                         "mytools.NO_TOOLS is empty"),
    ("mytools:NO_TOOLS_EITHER", "error: --tools: mytools:NO_TOOLS_EITHER names no tools: "
                                "mytools.NO_TOOLS_EITHER is empty"),
    ("mytools:make_none", "error: --tools: mytools:make_none names no tools: "
                          "mytools.make_none() is empty"),
    ("mytools", "error: --tools: 'mytools' is not MODULE:ATTR (e.g. mytools:TOOLS, "
                "package.module:make_tools)"),
    ("mytools:TOOLS --tools mytools:ONE", "error: --tools: two tools are named 'shout': "
                                          "from mytools:TOOLS and from mytools:ONE"),
    ("mytools.py:TOOLS", "error: --tools: 'mytools.py' is a file, and --tools names a "
                         "module: mytools:TOOLS (imported from {cwd} first, then from "
                         "sys.path and PYTHONPATH)"),
    ("./pkg/mytools.py:TOOLS", "error: --tools: './pkg/mytools.py' is a file, and --tools "
                               "names a module: pkg.mytools:TOOLS (imported from {cwd} "
                               "first, then from sys.path and PYTHONPATH)"),
    ("{cwd}/mytools.py:TOOLS", "error: --tools: '{cwd}/mytools.py' is a file, and --tools "
                               "names a module: mytools:TOOLS (imported from {cwd} first, "
                               "then from sys.path and PYTHONPATH)"),
    ("/elsewhere/mytools.py:TOOLS", "error: --tools: '/elsewhere/mytools.py' is a file, and "
                                    "--tools names a module: mytools:TOOLS (imported from "
                                    "{cwd} first, then from sys.path and PYTHONPATH)"),
])
@pytest.mark.parametrize("command", ["run", "describe", "serve", "eval"])
def test_a_spec_that_names_no_tools_is_a_one_line_usage_error(project, spec, message,
                                                               command):
    args = {"run": ["run", "prog.py"], "describe": ["describe"], "serve": ["serve"],
            "eval": ["eval", "prog.py", "--policy",
                     str(ROOT / "fixtures/policies/example.toml")]}[command]
    options = [part for s in spec.format(cwd=project).split(" --tools ")
               for part in ("--tools", s)]
    done = codemode(*args, *options, cwd=project)
    assert done.returncode == 2, done.stderr
    assert done.stderr == message.format(cwd=project) + "\n"
    assert done.stdout == ""


def test_a_module_that_fails_to_import_says_why(project):
    (project / "badtools.py").write_text("import json\nraise RuntimeError('no config file')\n")
    done = codemode("describe", "--tools", "badtools:TOOLS", cwd=project)
    assert done.returncode == 2
    assert done.stderr == ("error: --tools: importing 'badtools' failed: RuntimeError: no "
                           "config file\n")


@pytest.mark.parametrize("exits", ["sys.exit(3)", "raise SystemExit('no config')"])
def test_a_module_that_exits_while_imported_is_a_usage_error_not_its_status(project, exits):
    (project / "exittools.py").write_text(f"import sys\n{exits}\n")
    done = codemode("run", "prog.py", "--tools", "exittools:TOOLS", cwd=project)
    assert done.returncode == 2                  # not 3, which says a run paused
    assert done.stderr.startswith("error: --tools: importing 'exittools' failed: SystemExit: ")


def test_describe_prints_what_the_model_sees(project):
    done = codemode("describe", "--tools", "mytools:TOOLS", cwd=project)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# run_code\n\nRun a Python 3 program in an isolated sandbox")
    assert 'def shout(text: str) -> str:\n    """Upper-case a text and add an exclamation ' \
           'mark."""' in done.stdout
    assert "def secret_code() -> str:" in done.stdout
    assert "Only `run_code` may be called directly" in done.stdout
    assert "# shout" not in done.stdout                  # code mode: run_code alone


def test_describe_follows_the_policy_and_the_mode(project):
    policy = project / "p.toml"
    policy.write_text('expose = ["shout"]\n[limits]\nwall_clock_s = 3.5\n')
    done = codemode("describe", "--tools", "mytools:TOOLS", "--policy", str(policy),
                    "--mode", "both", "--json", cwd=project)
    assert done.returncode == 0, done.stderr
    tools = json.loads(done.stdout)["tools"]
    assert [t["name"] for t in tools] == ["run_code", "shout"]
    assert "secret_code" not in tools[0]["description"]
    assert "3.5 s of wall-clock time" in tools[0]["description"]
    assert tools[1]["inputSchema"]["properties"]["text"] == {"type": "string"}


def test_describe_with_a_policy_that_exposes_none_of_the_tools_is_a_usage_error(project):
    policy = project / "p.toml"
    policy.write_text('expose = ["shuot"]\n')
    done = codemode("describe", "--tools", "mytools:TOOLS", "--policy", str(policy),
                    cwd=project)
    assert done.returncode == 2
    assert done.stderr.startswith("error: PolicyError: ")
    assert "matches none of the session's tools (shout, secret_code)" in done.stderr


@pytest.mark.slow
def test_resume_takes_the_tools_and_the_paused_run_says_so(project):
    policy = project / "ask.toml"
    policy.write_text('[[rules]]\ntool = "shout"\naction = "ask"\n')
    paused = codemode("run", "prog.py", "--tools", "mytools:TOOLS", "--policy", str(policy),
                      "--log", "run.jsonl", cwd=project)
    assert paused.returncode == 3, paused.stderr
    command = paused.stderr.splitlines()[-1].strip()
    assert command.startswith("codemode resume run.jsonl ")
    assert " --tools mytools:TOOLS " in command
    argv = command.split()[1:]
    done = codemode(*argv, cwd=project)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "HELLO!\n"


NOISY = '''
from codemode import tool
print("chatter as it is imported")

@tool(read_only=True)
def peek(n: int) -> int:
    """Read-only: runs in a dry run too."""
    print("peek chatter", n)
    return n

@tool
def poke(n: int) -> int:
    """Has effects."""
    print("poke chatter", n)
    return n

TOOLS = [peek, poke]
'''


@pytest.mark.slow
@pytest.mark.parametrize("command", [["run"], ["run", "--json"], ["plan"], ["plan", "--json"],
                                     ["eval", "--json", "--policy", "quiet.toml"]])
def test_what_the_users_tools_print_goes_to_stderr_not_stdout(project, command):
    # stdout is the program's output, the --json report or the plan, which a pipe may parse
    (project / "noisy.py").write_text(NOISY)
    (project / "noisy_prog.py").write_text('peek(n=1)\npoke(n=2)\nprint("program output")\n')
    (project / "quiet.toml").write_text('tier = "restricted-in-process"\n')
    done = codemode(command[0], "noisy_prog.py", "--tools", "noisy:TOOLS", *command[1:],
                    cwd=project)
    assert done.returncode == 0, done.stderr
    assert "chatter as it is imported" in done.stderr
    if command[0] != "eval":                # eval's workers: their own processes, same rule
        assert "peek chatter 1" in done.stderr
    assert "chatter" not in done.stdout
    if command == ["run"]:
        assert done.stdout == "program output\n" and "poke chatter 2" in done.stderr
    elif command == ["run", "--json"]:
        assert json.loads(done.stdout)["stdout"] == "program output\n"
    elif command[0] == "eval":
        assert json.loads(done.stdout)["results"][0]["phases"][0]["status"] == "ok"
    elif command == ["plan", "--json"]:
        assert [e["tool"] for e in json.loads(done.stdout)["entries"]] == ["poke"]
    else:
        assert done.stdout.startswith('1. poke({"n": 2}) -> allow\n')


@pytest.mark.slow
@pytest.mark.parametrize("module", ["ONE", "NOISY"])
def test_serve_lists_and_runs_the_tools(project, module):
    # a module that prints as it is imported does not write into the MCP messages
    from mcp import ClientSession, StdioServerParameters, stdio_client

    if module == "NOISY":
        (project / "mytools.py").write_text('print("chatter as it is imported")\n' + MODULE)
    env = {**os.environ}
    env.pop("PYTHONPATH", None)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "codemode", "serve", "--tools", "mytools:ONE",
                                      "--mode", "both"], env=env, cwd=str(project))

    async def session() -> tuple[list[str], object]:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                listed = await client.list_tools()
                called = await client.call_tool("run_code", {"code": 'shout(text="hi")'})
                return [t.name for t in listed.tools], called.structured_content

    names, content = asyncio.run(asyncio.wait_for(session(), 300))
    assert names == ["run_code", "shout"]
    assert isinstance(content, dict) and content["result"] == "HI!"


@pytest.mark.slow
def test_eval_runs_a_corpus_against_the_users_tools(tmp_path):
    done = codemode("eval", "fixtures/my_tools_corpus", "--policy",
                    "fixtures/policies/my_tools.toml", "--tools", "fixtures.my_tools:TOOLS",
                    "--json", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    results = {r["id"]: r for r in json.loads(done.stdout)["results"]}
    assert results["benign-stock-report"]["outcome"] == "ran-ok", results
    hidden = results["hidden-reset-stock"]
    assert hidden["outcome"] == "blocked", hidden
    assert "UNKNOWN_TOOL" in hidden["reason"]


@pytest.mark.slow
def test_eval_checks_the_tool_oracles_on_the_users_tools(tmp_path):
    # The recorder wraps the user's tools as it wraps the reference ones: more calls served
    # than the case's budget is an escape.
    case = tmp_path / "flood.py"
    case.write_text("# id: flood\n# category: bridge-abuse\n# expect: few calls served\n"
                    "# source: test\n# oracle: tool:budget:3\n"
                    "for _ in range(5):\n    stock_level(item='mouse')\n")
    done = codemode("eval", str(case), "--policy", str(ROOT / "fixtures/policies/my_tools.toml"),
                    "--tools", "fixtures.my_tools:TOOLS", "--json", cwd=ROOT)
    assert done.returncode == 1, done.stderr
    [result] = json.loads(done.stdout)["results"]
    assert result["outcome"] == "escaped"
    assert result["fired"][0] == {"oracle": "tool:budget:3", "detail": "5 calls served"}


def test_eval_with_a_policy_naming_tools_the_users_lack_is_a_usage_error(tmp_path):
    done = codemode("eval", "fixtures/my_tools_corpus", "--policy",
                    "fixtures/policies/default.toml", "--tools", "fixtures.my_tools:TOOLS",
                    cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.startswith("error: expose: ['get_weather', ")
    assert "matches none of the tools (to_fahrenheit, stock_level, reset_stock)" in done.stderr


SLEEPY = '''
import time
from codemode import tool

@tool
def nap(seconds: float) -> str:
    """Sleep, then say so."""
    time.sleep(seconds)
    return "rested"

TOOLS = [nap]
'''


@pytest.mark.slow
def test_a_stuck_synchronous_tool_does_not_hold_the_command_after_its_run(project):
    """The run ends at its limit; the tool's thread cannot be stopped, and the command ends
    without waiting for it (it would sleep 120 s), its log closed and sound."""
    (project / "sleepy.py").write_text(SLEEPY)
    (project / "nap.py").write_text("print(nap(seconds=120))\n")
    done = codemode("run", "nap.py", "--tools", "sleepy:TOOLS", "--timeout", "2",
                    "--log", "s.jsonl", cwd=project, timeout=100)   # raises if it waits
    assert done.returncode == 1, done.stderr
    assert "1 tool call(s) still running in a thread were left behind" in done.stderr
    checked = codemode("log", "check", "s.jsonl", cwd=project)
    assert checked.returncode == 0, checked.stdout + checked.stderr
