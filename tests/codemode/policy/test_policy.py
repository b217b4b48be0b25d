"""Policies as data: loading and validating TOML, exposing tools by glob, per-tool rules
enforced in the pipeline (deny, ask without an approval channel), `codemode run --policy`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codemode import Session
from codemode._policy.policy import Condition, Policy, PolicyError, PolicyWarning, Rule
from codemode.fixtures.reference_tools import ToolRecorder, reference_tools
from codemode.pipeline import Ask
from codemode.pipeline.log import MemoryLog
from codemode.sandbox import SandboxLimits

ROOT = Path(__file__).resolve().parents[3]
POLICIES = ROOT / "fixtures" / "policies"


def session_with(policy: Policy) -> tuple[Session, ToolRecorder]:
    recorder = ToolRecorder()
    session = Session(tools=reference_tools(recorder), log=MemoryLog())   # paused runs: here
    policy.apply(session)
    return session, recorder


async def run(session: Session, code: str):
    result = await session.call("run_code", {"code": code})
    assert not result.is_error, result.text
    return result.value.get("result")


# ---- loading --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["default", "strict", "example"])
def test_bundled_policies_load(name):
    policy = Policy.load(POLICIES / f"{name}.toml")
    assert policy.tier == "wasm"
    assert policy.description


def test_default_policy_limits_and_exposed_tools():
    policy = Policy.load(POLICIES / "default.toml")
    assert policy.limits == SandboxLimits(wall_clock_s=5.0, memory_bytes=256 << 20,
                                          output_bytes=1 << 20, max_subcalls=1000,
                                          max_concurrent_subcalls=10, request_bytes=16 << 20)
    session = Session(tools=reference_tools())
    assert policy.exposed_names(session) == ["get_weather", "add", "search_docs", "echo",
                                             "sleep_ms", "get_cached_config", "fail"]


@pytest.mark.parametrize("text, key, detail", [
    ('[[rules]]\ntool = "x"\naction = "maybe"\n', "rules[0].action",
     "Invalid enum value 'maybe'; expected one of 'allow', 'ask', 'deny'"),
    ('[limits]\nwall_clock_s = 5\nbogus = 1\n', "limits.bogus",
     "Object contains unknown field 'bogus'"),
    ('[limits]\nwall_clock_s = -1\n', "limits.wall_clock_s", "Expected 'float' > 0.0"),
    ('tier = "docker"\n', "tier",
     "Invalid enum value 'docker'; expected one of 'restricted', 'restricted-in-process', 'wasm'"),
    ('[[rules]]\naction = "deny"\n', "rules[0].tool", "Object missing required field 'tool'"),
    ('[[rules]]\ntool = "a"\naction = "deny"\n[[rules]]\ntool = "b"\naction = "deny"\n'
     'when = { arg = "p", matches = "(" }\n', "rules[1].when.matches",
     "not a valid regular expression: missing ), unterminated subpattern at position 0"),
    ('[[rules]]\ntool = "a"\naction = "deny"\nwhen = { arg = "p" }\n', "rules[0].when",
     "a condition needs exactly one of equals, matches, contains, gt, lt (got none)"),
    ('expose = "get_*"\n', "expose", "Expected 'array', got 'str'"),
])
def test_invalid_policy_file_names_path_and_key(tmp_path, text, key, detail):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(PolicyError) as caught:
        Policy.load(path)
    error = caught.value
    assert (error.path, error.key, error.detail) == (str(path), key, detail)
    assert str(error) == f"{path}: {key}: {detail}"


def test_policy_file_that_is_not_toml(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("tier = \n")
    with pytest.raises(PolicyError) as caught:
        Policy.load(path)
    assert caught.value.path == str(path) and caught.value.key is None
    assert str(caught.value).startswith(f"{path}: not valid TOML: ")


def test_a_policy_file_that_never_ends_is_refused_after_1_mib(tmp_path):
    path = tmp_path / "endless.toml"
    path.symlink_to("/dev/zero")              # a device: reading it whole never ends
    with pytest.raises(PolicyError) as caught:
        Policy.load(path)
    assert str(caught.value) == f"{path}: larger than 1 MiB, the most a policy file may be"


def test_policy_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'description = "caf\xe9"\n')
    with pytest.raises(PolicyError) as caught:
        Policy.load(path)
    assert str(caught.value) == f"{path}: not UTF-8 text (byte 18); save the policy as UTF-8"


def test_missing_policy_file(tmp_path):
    with pytest.raises(PolicyError) as caught:
        Policy.load(tmp_path / "absent.toml")
    assert str(caught.value) == f"{tmp_path / 'absent.toml'}: cannot read the policy file: " \
                                "No such file or directory"


# ---- rules and conditions ---------------------------------------------------------------

@pytest.mark.parametrize("condition, arguments, holds", [
    (Condition(arg="path", matches="^/etc/"), {"path": "/etc/passwd"}, True),
    (Condition(arg="path", matches="^/etc/"), {"path": "/home/etc/x"}, False),
    (Condition(arg="path", matches="^/etc/"), {"path": 5}, False),
    (Condition(arg="path", matches="^/etc/"), {}, False),
    (Condition(arg="n", gt=10), {"n": 11}, True),
    (Condition(arg="n", gt=10), {"n": 10}, False),
    (Condition(arg="n", gt=0), {"n": True}, False),          # bools are not numbers here
    (Condition(arg="n", lt=0.5), {"n": 0.25}, True),
    (Condition(arg="n", lt=0.5), {"n": "0.1"}, False),
    (Condition(arg="mode", equals="rw"), {"mode": "rw"}, True),
    (Condition(arg="mode", equals=1), {"mode": True}, False),
    (Condition(arg="n", equals=2), {"n": 2.0}, True),
    (Condition(arg="tags", contains="x"), {"tags": ["a", "x"]}, True),
    (Condition(arg="text", contains="pass"), {"text": "a password"}, True),
    (Condition(arg="text", contains="pass"), {"text": 7}, False),
    (Condition(arg="opts.level", gt=3), {"opts": {"level": 4}}, True),
    (Condition(arg="opts.level", gt=3), {"opts": 4}, False),
])
def test_condition(condition, arguments, holds):
    assert condition.holds(arguments) is holds


def test_first_matching_rule_wins_and_no_match_is_no_decision():
    policy = Policy(rules=(
        Rule(tool="get_*", action="deny", when=Condition(arg="city", equals="Atlantis"),
             reason="fictional"),
        Rule(tool="get_*", action="allow"),
        Rule(tool="*", action="ask"),
    ))
    assert policy.decide("get_weather", {"city": "Atlantis"}).reason == "fictional"
    assert type(policy.decide("get_weather", {"city": "Oslo"})).__name__ == "Allow"
    assert policy.decide("echo", {}).reason == 'policy requires approval for tool "echo"'
    assert Policy().decide("echo", {}) is None


def test_rule_globs_are_case_sensitive():
    rule = Rule(tool="read_*", action="deny")
    assert rule.applies("read_secret", {}) and not rule.applies("READ_SECRET", {})


# ---- applied to a session ---------------------------------------------------------------

ASK_PROGRAM = """
try:
    sleep_ms(ms=1)
    outcome = "served"
except ToolDenied as exc:
    outcome = [type(exc).__name__, exc.code, exc.message]
outcome
"""


async def test_ask_without_an_approver_pauses_the_run():
    policy = Policy(rules=(Rule(tool="sleep_ms", action="ask",
                                reason="sleeping on the host needs approval"),))
    session, recorder = session_with(policy)
    assert session.approval is None
    result = await session.call("run_code", {"code": ASK_PROGRAM}, call_id="r")
    assert result.value["status"] == "pending"
    assert result.value["approvals"] == [{"id": "r:1", "toolName": "sleep_ms",
                                          "arguments": {"ms": 1},
                                          "reason": "sleeping on the host needs approval"}]
    assert recorder.served == 0


async def test_a_rejected_ask_is_a_denial_the_program_sees():
    policy = Policy(rules=(Rule(tool="sleep_ms", action="ask",
                                reason="sleeping on the host needs approval"),))
    session, recorder = session_with(policy)
    session.mount_approval("never")
    assert await run(session, ASK_PROGRAM) == ["ToolDenied", "DENIED",
                                               'the user rejected tool "sleep_ms"']
    assert recorder.served == 0


NAP_RULE = Rule(tool="sleep_ms", action="ask", reason="sleeping on the host needs approval")


def test_an_ask_rule_without_a_log_refuses_to_start_before_any_call():
    recorder = ToolRecorder()
    session = Session(tools=reference_tools(recorder))          # no log: nothing could resume
    with pytest.raises(PolicyError) as caught:
        Policy(rules=(Rule(tool="add", action="deny"), NAP_RULE)).apply(session)
    assert caught.value.key == "rules[1].action"
    assert "an `ask` rule for 'sleep_ms' would pause a program's run (the session has no " \
        "approver mounted) in a session without a log, where nothing could resume it" \
        in str(caught.value)
    assert "Session(log=MemoryLog())" in str(caught.value)
    assert session.resolve("run_code") is None and recorder.served == 0
    deferred = Rule(tool="sleep_*", action="ask", defer=True)   # defers: even with an approver
    with pytest.raises(PolicyError, match=r"rules\[0\]\.action: .*\(it defers its approval\)"):
        Policy(rules=(deferred,)).apply(Session(tools=reference_tools(recorder),
                                                approval="never"))


@pytest.mark.parametrize("setup", ["log file", "in memory on purpose", "approver",
                                   "no such tool"])
def test_an_ask_rule_starts_when_its_pause_could_be_resumed_or_cannot_happen(setup, tmp_path):
    tools = reference_tools(ToolRecorder())
    session = {
        "log file": lambda: Session(tools=tools, log=str(tmp_path / "s.jsonl")),
        "in memory on purpose": lambda: Session(tools=tools, log=MemoryLog()),
        "approver": lambda: Session(tools=tools, approval="never"),
        "no such tool": lambda: Session(tools=[t for t in tools if t.name != "sleep_ms"]),
    }[setup]()
    assert session.log_chosen == (setup in ("log file", "in memory on purpose"))
    Policy(rules=(Rule(tool="sleep_ms", action="ask", optional=True),)).apply(session)
    assert session.resolve("run_code") is not None
    session.log.close()


def test_only_an_ask_rule_defers():
    with pytest.raises(PolicyError, match=r"rules\[0\]\.defer: only an 'ask' rule can defer"):
        Policy.from_data({"rules": [{"tool": "x", "action": "deny", "defer": True}]})
    rule = Rule(tool="send_*", action="ask", defer=True)
    assert rule.decision("send_mail") == Ask('policy requires approval for tool "send_mail"',
                                             defer=True)


DENY_BY_ARGUMENT = """
seen = []
for city in ["Oslo", "Atlantis"]:
    try:
        seen.append(get_weather(city=city)["city"])
    except ToolDenied as exc:
        seen.append([exc.code, exc.message])
seen
"""


async def test_deny_by_argument_condition():
    policy = Policy(rules=(Rule(tool="get_weather", action="deny",
                                when=Condition(arg="city", matches="^(?i:atlantis)$"),
                                reason="no weather for fictional cities"),))
    session, recorder = session_with(policy)
    assert await run(session, DENY_BY_ARGUMENT) == [
        "Oslo", ["DENIED", "no weather for fictional cities"]]
    assert recorder.by_tool == {"get_weather": 1}


async def test_expose_globs_decide_what_programs_see():
    policy = Policy(expose=("get_*", "add"))
    recorder = ToolRecorder()
    session = Session(tools=reference_tools(recorder))
    mode = policy.apply(session)
    assert [d.name for d in mode.exposed_tools()] == ["get_weather", "add", "get_cached_config"]
    code = ("out = []\nfor name in ['add', 'echo', 'read_secret']:\n    try:\n"
            "        out.append(call_tool(name, a=1, b=2))\n    except ToolCallError as e:\n"
            "        out.append(e.code)\nout")
    assert await run(session, code) == [3, "UNKNOWN_TOOL", "UNKNOWN_TOOL"]
    assert recorder.hidden == []


async def test_limits_come_from_the_policy():
    policy = Policy(limits=SandboxLimits(wall_clock_s=30.0, max_subcalls=3))
    session, _ = session_with(policy)
    result = await session.call("run_code", {"code": "for i in range(5):\n    add(a=i, b=1)"})
    assert result.is_error
    assert result.error.message.startswith("code run failed (subcalls): ")


async def test_rules_do_not_apply_to_run_code_itself():
    session, _ = session_with(Policy(rules=(Rule(tool="*", action="deny"),)))
    result = await session.call("run_code", {"code": "try:\n    add(a=1, b=2)\n"
                                                     "except ToolDenied as e:\n    r = e.code\nr"})
    assert result.value["result"] == "DENIED"


def test_restricted_tier_builds_its_sandbox():
    from codemode.sandbox import RestrictedProcessSandbox, RestrictedSandbox, WasmSandbox
    assert isinstance(Policy(tier="restricted").build_sandbox(), RestrictedProcessSandbox)
    assert isinstance(Policy(tier="restricted-in-process").build_sandbox(), RestrictedSandbox)
    assert isinstance(Policy().build_sandbox(), WasmSandbox)


# ---- the command line -------------------------------------------------------------------

def codemode(*args, timeout=120):
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "codemode", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env)


def test_run_with_a_policy_file(tmp_path):
    program = tmp_path / "p.py"
    program.write_text("try:\n    echo(value='my password')\nexcept ToolDenied as e:\n"
                       "    r = e.message\n[r, add(a=1, b=2)]\n")
    done = codemode("run", str(program), "--builtin", "--json", "--log", str(tmp_path / "s.db"),
                    "--policy", str(POLICIES / "example.toml"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["value"] == ["do not echo passwords", 3]


def test_run_with_an_invalid_policy_exits_2_naming_path_and_key(tmp_path):
    program = tmp_path / "p.py"
    program.write_text("1\n")
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rules]]\ntool = "x"\naction = "maybe"\n')
    done = codemode("run", str(program), "--policy", str(bad))
    assert done.returncode == 2
    assert f"{bad}: rules[0].action: Invalid enum value 'maybe'" in done.stderr


def test_an_expose_list_that_matches_no_tool_is_an_error():
    from codemode import tool

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    with pytest.raises(PolicyError) as caught:
        Policy(expose=("nope",)).apply(Session(tools=[add]))
    assert str(caught.value) == "expose: ['nope'] matches none of the session's tools (add)"


@pytest.mark.parametrize("name", ["default", "strict", "example"])
async def test_bundled_policies_apply_to_a_session_without_tools(name):
    session = Session()
    mode = Policy.load(POLICIES / f"{name}.toml").apply(session)
    assert mode.exposed_tools() == []
    assert await run(session, "print('hi')\n6 * 7") == 42


@pytest.mark.parametrize("name, exposed", [
    ("default", ["get_weather", "add", "search_docs", "sleep_ms", "echo", "fail"]),
    ("strict", ["get_weather", "add", "search_docs", "echo", "fail"]),
])
def test_names_of_tools_the_session_lacks_are_skipped(name, exposed):
    from codemode.fixtures.toolset import builtin_tools

    session = Session(tools=builtin_tools())      # has no get_cached_config
    mode = Policy.load(POLICIES / f"{name}.toml").apply(session)
    assert [d.name for d in mode.exposed_tools()] == exposed


# ---- rules checked against the tools they govern ----------------------------------------

def _enum_keys(kind, prefix=""):
    """Every Literal field reachable from a policy struct, as (key, values)."""
    import msgspec.inspect as mi

    info = mi.type_info(kind) if not isinstance(kind, mi.Type) else kind
    out = []
    for field in info.fields:
        kinds = field.type.types if isinstance(field.type, mi.UnionType) else (field.type,)
        for t in kinds:
            key = f"{prefix}{field.encode_name}"
            if isinstance(t, mi.LiteralType):
                out.append((key, t.values))
            elif isinstance(t, mi.StructType):
                out += _enum_keys(t, key + ".")
            elif hasattr(t, "item_type") and isinstance(t.item_type, mi.StructType):
                out += _enum_keys(t.item_type, key + "[0].")
    return out


def _data_with(key, value):
    """Minimal policy data with `value` at `key` (`rules[0].action`, `tier`)."""
    data = {"rules": [{"tool": "x", "action": "deny"}]}
    node = data
    parts = key.replace("[0]", ".0").split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    node[parts[-1]] = value
    return data


def test_every_enum_of_a_policy_lists_its_valid_values():
    keys = _enum_keys(Policy)
    assert {"tier", "rules[0].action"} <= {k for k, _ in keys}
    for key, values in keys:
        with pytest.raises(PolicyError) as caught:
            Policy.from_data(_data_with(key, "no-such-value"))
        expected = ", ".join(repr(v) for v in values)
        assert caught.value.key == key
        assert caught.value.detail == (
            f"Invalid enum value 'no-such-value'; expected one of {expected}")


def test_a_rule_naming_a_tool_the_session_lacks_is_refused_with_did_you_mean():
    from codemode.fixtures.toolset import builtin_tools

    policy = Policy(rules=(Rule(tool="sleep_sm", action="ask"),))
    with pytest.raises(PolicyError) as caught:
        policy.apply(Session(tools=builtin_tools()))
    assert caught.value.key == "rules[0].tool"
    assert caught.value.detail == (
        "'sleep_sm' is not a tool of this session; did you mean 'sleep_ms'? (a rule for a "
        "tool the session may lack says `optional = true`)")


def test_a_labels_entry_naming_a_tool_the_session_lacks_is_refused_like_a_rule():
    # A misspelt [[labels]] entry labels nothing, which switches off every rule on its label.
    from codemode._run.labels import LabelRule
    from codemode.fixtures.toolset import builtin_tools

    policy = Policy(labels=(LabelRule(tool="sleep_sm", label="private"),))
    with pytest.raises(PolicyError) as caught:
        policy.apply(Session(tools=builtin_tools()))
    assert caught.value.key == "labels[0].tool"
    assert caught.value.detail == (
        "'sleep_sm' is not a tool of this session; did you mean 'sleep_ms'? (a [[labels]] "
        "entry for a tool the session may lack says `optional = true`)")
    glob = Policy(labels=(LabelRule(tool="mail_*", label="private"),))
    with pytest.warns(PolicyWarning, match=r"labels\[0\]\.tool: 'mail_\*' matches no tool"):
        glob.apply(Session(tools=builtin_tools()))
    Policy(labels=(LabelRule(tool="sleep_sm", label="private", optional=True),)).apply(
        Session(tools=builtin_tools()))


def test_an_optional_rule_may_name_a_tool_the_session_lacks(recwarn):
    from codemode.fixtures.toolset import builtin_tools

    policy = Policy(rules=(Rule(tool="read_secret", action="deny", optional=True),
                           Rule(tool="admin_*", action="deny", optional=True)))
    policy.apply(Session(tools=builtin_tools()))
    assert [w for w in recwarn if issubclass(w.category, PolicyWarning)] == []


def test_a_glob_matching_no_tool_is_a_warning():
    from codemode.fixtures.toolset import builtin_tools

    policy = Policy(rules=(Rule(tool="admin_*", action="deny"),))
    with pytest.warns(PolicyWarning) as caught:
        policy.apply(Session(tools=builtin_tools()))
    assert [str(w.message) for w in caught] == [
        "policy rules[0].tool: 'admin_*' matches no tool of this session"]


@pytest.mark.parametrize("name", ["default", "strict", "example"])
@pytest.mark.parametrize("toolset", ["builtin", "reference", "other"])
def test_shipped_policies_apply_with_and_without_builtin_tools(name, toolset, recwarn):
    from codemode import tool
    from codemode.fixtures.toolset import builtin_tools

    @tool
    def get_current_time(timezone: str) -> str:
        """An MCP server's tool, as with `--mcp` alone."""
        return timezone

    tools = {"builtin": builtin_tools, "reference": reference_tools,
             "other": lambda: [get_current_time]}[toolset]()
    policy = Policy.load(POLICIES / f"{name}.toml")
    if name != "example" and toolset == "other":     # they expose reference tools by name
        with pytest.raises(PolicyError, match="expose"):
            policy.apply(Session(tools=tools, log=MemoryLog()))
        return
    policy.apply(Session(tools=tools, log=MemoryLog()))
    assert [str(w.message) for w in recwarn if issubclass(w.category, PolicyWarning)] == []


def test_the_cli_refuses_a_misspelt_rule_with_exit_2_and_warns_about_an_empty_glob(tmp_path):
    program = tmp_path / "p.py"
    program.write_text("1\n")
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rules]]\ntool = "sleep_sm"\naction = "ask"\n')
    done = codemode("run", str(program), "--builtin", "--policy", str(bad))
    assert done.returncode == 2
    assert "rules[0].tool: 'sleep_sm' is not a tool of this session; did you mean 'sleep_ms'?" \
        in done.stderr
    glob = tmp_path / "glob.toml"
    glob.write_text('[[rules]]\ntool = "admin_*"\naction = "deny"\n')
    done = codemode("run", str(program), "--builtin", "--policy", str(glob))
    assert done.returncode == 0, done.stderr
    assert done.stderr == "codemode: warning: policy rules[0].tool: 'admin_*' matches no tool " \
        "of this session\n"


# ---- run_has labels that nothing gives ---------------------------------------------------

def _labelled_session() -> Session:
    from codemode import tool

    @tool(labels=["private"])
    def read_email(folder: str) -> str:
        """The newest mail of a folder."""
        return "hello"

    @tool
    def send_email(to: str) -> str:
        """Send a mail."""
        return "sent"

    return Session(tools=[read_email, send_email], log=MemoryLog())


def _label_rule(label: object, **condition: object) -> dict:
    return {"tool": "send_*", "action": "ask", "when": {"run_has": label, **condition}}


@pytest.mark.parametrize(("label", "suggested"), [
    ("Private", "'private'"),          # a case difference
    ("privat", "'private'"),           # a typo
    (["private", "secrte"], "'secret'"),  # one of a list: given by the [[labels]] entry
])
def test_a_run_has_label_nothing_gives_is_refused_with_did_you_mean(label, suggested):
    policy = Policy.from_data({"rules": [_label_rule(label)],
                               "labels": [{"tool": "read_email", "label": "secret"}]})
    with pytest.raises(PolicyError, match="could never fire; did you mean " + suggested) as err:
        policy.apply(_labelled_session())
    assert err.value.key == "rules[0].when"


def test_labels_given_by_a_definition_or_an_entry_or_marked_optional_are_accepted():
    session = _labelled_session()
    Policy.from_data({"rules": [_label_rule(["private", "secret"]),
                                _label_rule("given-at-run-time", optional=True)],
                      "labels": [{"tool": "read_email", "label": "secret"}]}).apply(session)
    # a session without tools is not checked (its tools may come later)
    Policy.from_data({"rules": [_label_rule("anything")]}).apply(Session(log=MemoryLog()))


def test_optional_belongs_to_a_run_has_condition_only():
    with pytest.raises(PolicyError, match="only a 'run_has' condition can be optional"):
        Policy.from_data({"rules": [{"tool": "send_*", "action": "deny",
                                     "when": {"arg": "to", "equals": "x", "optional": True}}]})
