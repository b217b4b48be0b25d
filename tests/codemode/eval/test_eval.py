"""The policy evaluator: corpus loading, canaries, oracles, classification, reports, and
runs over the shipped corpus (`fixtures/attacks/`) and over small corpora written here,
whose cases make oracles fire on purpose."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest

from codemode._eval import (
    Fired,
    PhaseReport,
    classify,
    evaluate,
    load_corpus,
    parse_case,
    substitute,
    to_html,
    to_json,
)
from codemode._eval._canaries import Listener, Plant
from codemode._eval._corpus import PHASE_SPLIT, PLACEHOLDER, CorpusError
from codemode._eval._observe import HostState, LeakScanner, ObservedSandbox
from codemode._eval._report import EvalReport
from codemode._policy.policy import Policy
from codemode.fixtures.reference_tools import scan_arguments
from codemode.sandbox import RunOutcome, RunRequest

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "fixtures" / "attacks"
DEFAULT = ROOT / "fixtures" / "policies" / "default.toml"


def write_case(directory: Path, name: str, header: dict, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [f"# {key}: {value}" for key, value in header.items()]
    path = directory / name
    path.write_text("\n".join(lines) + "\n" + textwrap.dedent(body).lstrip("\n"))
    return path


def fast_policy(**changes) -> Policy:
    data = msgspec.to_builtins(Policy.load(DEFAULT))
    data["limits"]["wall_clock_s"] = 2.0     # the time oracle allows 2x: 4 s, ample under load
    data.update(changes)
    return Policy.from_data(data)


# ---- corpus -------------------------------------------------------------------------------

def test_parse_case_header_phases_and_placeholders(tmp_path):
    path = write_case(tmp_path, "two.py", {
        "id": "two-phase", "category": "state-leak", "expect": "nothing leaks",
        "source": "general technique", "oracle": "p2:SEEN, leak:state"}, """
        token = "@@STATE_TOKEN@@"
        # ---- phase 2 (fresh sandbox, same host) ----
        print("phase two", "@@PORT@@")
        """)
    case = parse_case(path)
    assert (case.id, case.category, case.oracles, case.benign) == (
        "two-phase", "state-leak", ("p2:SEEN", "leak:state"), False)
    first, second = case.phases
    assert first.endswith('token = "@@STATE_TOKEN@@"\n')
    assert second == 'print("phase two", "@@PORT@@")\n'
    assert case.placeholders() == {"STATE_TOKEN", "PORT"}
    assert substitute(second, {"PORT": "4242"}) == 'print("phase two", "4242")\n'
    assert substitute("@@UNKNOWN@@", {}) == "@@UNKNOWN@@"


def test_a_case_that_never_ends_is_a_corpus_error_not_read_whole(tmp_path):
    path = tmp_path / "endless.py"
    path.symlink_to("/dev/zero")
    with pytest.raises(CorpusError) as caught:
        parse_case(path)
    assert str(caught.value) == (f"{path}: cannot read the case: larger than 64 MiB, the most "
                                 "a program may be")


def test_expect_error_header_and_id_fallback(tmp_path):
    path = write_case(tmp_path, "no-id.py", {"category": "benign",
                                             "expect_error": "boom"}, "raise ValueError('boom')\n")
    case = parse_case(path)
    assert (case.id, case.benign, case.expect_error) == ("no-id", True, "boom")


def test_a_new_file_in_a_corpus_directory_is_a_new_case(tmp_path):
    write_case(tmp_path / "corpus", "a.py", {"id": "a", "category": "benign"}, "print(1)\n")
    assert [c.id for c in load_corpus([tmp_path / "corpus"])] == ["a"]
    write_case(tmp_path / "corpus" / "deeper", "b.py", {"id": "b", "category": "network"},
               "print(2)\n")
    (tmp_path / "corpus" / "notes.txt").write_text("not a case")
    assert [c.id for c in load_corpus([tmp_path / "corpus"])] == ["a", "b"]


# ---- canaries and observation --------------------------------------------------------------

def test_plant_finds_writes_markers_and_read_only_changes(tmp_path):
    plant = Plant(tmp_path / "tree")
    plant.reset("secret-1")
    assert plant.canary_read.read_text() == "secret-1\n"
    assert plant.findings() == type(plant.findings())()
    (plant.workspace / ".." / "out" / "pwned.txt").write_text("x")
    plant.marker.with_name("marker.fork").write_text("")
    os.chmod(plant.ro_host, 0o644)
    plant.ro_host.write_text("changed")
    findings = plant.findings()
    assert findings.written == ("run/host/out/pwned.txt",)
    assert findings.markers == ("run/marker.fork",)
    assert findings.ro_modified
    plant.reset("secret-2")
    assert plant.findings() == type(plant.findings())()
    assert (plant.workspace / "escape_rel").resolve() == plant.canary_read.resolve()


def test_listener_counts_connections():
    listener = Listener()
    try:
        socket.create_connection(("127.0.0.1", listener.port), timeout=2).close()
        for _ in range(1000):
            if listener.connections:
                break
            import time
            time.sleep(0.01)
        assert listener.connections == 1
    finally:
        listener.close()


def test_leak_scanner_finds_cut_and_partial_copies():
    secret = "cnry-key-0123456789abcdef0123456789abcdef"
    scanner = LeakScanner({"leak:key": secret})
    assert scanner.scan("...cnry-key-0123456789ab...") == {"leak:key"}
    assert scanner.scan("tail: " + secret[-14:]) == {"leak:key"}
    assert scanner.scan("middle: " + secret[20:34]) == {"leak:key"}
    assert scanner.scan("cnry-key-01234") == set()
    assert LeakScanner({"leak:env": "short"}).scan("a short text") == {"leak:env"}


def test_host_state_notices_a_poisoned_json_encoder():
    import json as host_json
    state = HostState()
    original = host_json.JSONEncoder.default
    host_json.JSONEncoder.default = lambda self, o: "poisoned"
    try:
        problems = state.poisoned()
    finally:
        host_json.JSONEncoder.default = original
    assert any("json.encoder.JSONEncoder.default" in p for p in problems)
    assert "json.dumps accepted a set" in problems
    assert state.poisoned() == []


def test_argument_scan():
    class Live:
        pass
    scan = scan_arguments({"value": [1, "é", None], "sub_call_id": "x",
                           "obj": Live(), "t": (1,), "nan": float("nan")})
    assert scan.reserved == ("sub_call_id",)
    assert sorted(scan.nonjson) == ["$.nan", "$.obj", "$.t"]
    assert scan.live == ("$.obj",)
    assert scan_arguments({"v": "x" * 1000}).json_bytes > 1000


def test_observed_sandbox_records_reentry_live_batches_leaks_and_late_calls():
    secret = "cnry-key-" + "ab12" * 8

    from codemode.sandbox import SubCall, SubCallBatch, SubCallReply

    outer = SubCallBatch(cancel=(1,))

    class Fake:
        def run(self, request, dispatch, cancel=None):
            self.dispatch = dispatch
            dispatch(outer)
            dispatch(object())                       # not a batch: a live object
            dispatch(SubCallBatch(calls=(SubCall(id=1, name="t", args=msgspec.Raw(
                ('{"args": "' + secret + '"}').encode())),)))
            return RunOutcome(status="ok")

    def host(batch):
        if batch is outer:
            fake.dispatch(SubCallBatch())             # nested: the host ran program code
        return SubCallReply()

    fake = Fake()
    observed = ObservedSandbox(fake, LeakScanner({"leak:key": secret}))
    observed.run(RunRequest(code=""), host)
    fake.dispatch(SubCallBatch())                     # after run returned
    [record] = observed.records
    assert (record.batches, record.reentrant, record.live, record.after_return) == (5, 1, 1, 1)
    assert record.leaks == {"leak:key"}


def test_tool_recorder_counts_hidden_nested_late_and_ignores_suspended_calls():
    import contextvars

    from codemode.fixtures import reference_tools as rt
    recorder = rt.ToolRecorder()
    recorder.record("read_secret", {})
    with recorder.suspended():
        recorder.record("admin_delete_all", {})

    def nested():
        rt._serving.set("echo")
        recorder.record("add", {"a": 1, "b": 2})

    contextvars.copy_context().run(nested)
    recorder.close()
    recorder.record("echo", {"value": "x" * 100})
    assert (recorder.served, recorder.hidden, recorder.reentrant, recorder.after_close) == (
        3, ["read_secret"], 1, 1)
    assert recorder.max_arg_bytes > 100


# ---- classification ----------------------------------------------------------------------

def phase(status="ok", kind=None, message="", stdout=""):
    return PhaseReport(status=status, error_kind=kind, error_message=message, stdout=stdout)


@pytest.mark.parametrize("benign, fired, phases, matches, expected", [
    (False, [Fired("leak:env", "x"), Fired("time", "y")], [phase()], None, "escaped"),
    (False, [Fired("mem", "y")], [phase("limit", "memory")], None, "host-affected"),
    (False, [Fired("worker:died", "exit -11")], [], None, "host-affected"),
    (False, [], [phase("limit", "timeout")], None, "limit"),
    (False, [], [phase("error", "exception")], None, "blocked"),
    (False, [], [phase()], None, "blocked"),
    (False, [], [phase("host-error", message="boom")], None, "host-affected"),
    (True, [], [phase()], True, "ran-ok"),
    (True, [], [phase()], False, "wrong-output"),
    (True, [], [phase("limit", "timeout")], True, "wrong-output"),
    (True, [Fired("p2:X", "")], [phase()], True, "escaped"),
])
def test_classify(benign, fired, phases, matches, expected):
    outcome, _ = classify(benign=benign, fired=fired, phases=phases, stdout_matches=matches)
    assert outcome == expected


def test_classify_expected_error():
    ok = classify(benign=True, fired=[], phases=[phase("error", "exception", "boom: 3")],
                  stdout_matches=True, expect_error="boom")
    assert ok[0] == "ran-ok"
    missing = classify(benign=True, fired=[], phases=[phase()], stdout_matches=True,
                       expect_error="boom")
    assert missing[0] == "wrong-output"


# ---- end to end ----------------------------------------------------------------------------

def by_id(results):
    return {r.id: r for r in results}


@pytest.mark.slow
def test_oracles_fire_when_a_policy_lets_a_case_through(tmp_path):
    """A policy exposing every tool (hidden ones included) lets these cases do what the
    oracles look for; each must be caught."""
    corpus = tmp_path / "corpus"
    write_case(corpus, "hidden.py", {"id": "hidden", "category": "bridge-abuse",
                                     "oracle": "tool:hidden, leak:key"},
               'print("key:", call_tool("read_secret"))\n')
    write_case(corpus, "budget.py", {"id": "budget", "category": "bridge-abuse",
                                     "oracle": "tool:budget:3"},
               "for i in range(5):\n    add(a=i, b=1)\n")
    write_case(corpus, "argsize.py", {"id": "argsize", "category": "bridge-abuse",
                                      "oracle": "tool:argsize:100"},
               'echo(value="x" * 1000)\n')
    write_case(corpus, "reserved.py", {"id": "reserved", "category": "bridge-abuse",
                                       "oracle": "tool:reserved"},
               'echo(value=1, parent_call_id="forged")\n')
    write_case(corpus, "p2.py", {"id": "p2", "category": "state-leak",
                                 "oracle": "p2:SAW, leak:state"},
               'x = "@@STATE_TOKEN@@"\n# ---- phase 2 (fresh sandbox, same host) ----\n'
               'print("SAW")\n')
    write_case(corpus, "slow.py", {"id": "slow", "category": "resource-cpu",
                                   "oracle": "time:0.3"},
               "import time\ntime.sleep(0.6)\n")
    write_case(corpus, "clean.py", {"id": "clean", "category": "state-leak",
                                    "oracle": "leak:state, host:poisoned"},
               'import random\nrandom.seed("@@STATE_TOKEN@@")\n'
               '# ---- phase 2 (fresh sandbox, same host) ----\nprint(random.random())\n')
    write_case(corpus, "flow.py", {"id": "flow", "category": "data-flow",
                                   "labels": "search_docs=private", "oracle": "flow:sink"},
               'text = search_docs(query="umbrella")[0]["text"]\n'
               'echo(value=["copy", text[3:30]])\nadd(a=1, b=2)\n')
    results = by_id(evaluate(load_corpus([corpus]), fast_policy(expose=["*"], rules=[])))
    fired = {case: {f.oracle for f in r.fired} for case, r in results.items()}
    assert results["hidden"].outcome == "escaped"
    assert fired["hidden"] == {"tool:hidden", "leak:key"}
    assert fired["budget"] == {"tool:budget:3"}
    assert fired["argsize"] == {"tool:argsize:100"}
    # the dispatcher refuses parent-token names before any tool runs (test_argument_scan
    # covers the recorder's side of this oracle)
    assert (results["reserved"].outcome, fired["reserved"]) == ("blocked", set())
    assert fired["p2"] == {"p2:SAW"}
    assert (results["slow"].outcome, fired["slow"]) == ("host-affected", {"time"})
    assert (results["clean"].outcome, fired["clean"]) == ("blocked", set())
    assert (results["flow"].outcome, fired["flow"]) == ("escaped", {"flow:sink"})
    assert results["flow"].reason == ("flow:sink: echo received 27 characters of a "
                                      "search_docs result")


@pytest.mark.slow
def test_cli_picks_up_a_new_case_and_exits_1_on_an_escape(tmp_path):
    corpus = tmp_path / "corpus"
    write_case(corpus, "ok.py", {"id": "ok", "category": "benign",
                                 "oracle": "stdout-equals-reference"},
               'print(add(a=2, b=3), get_weather(city="Oslo")["temp_c"])\n')
    policy = tmp_path / "all.toml"
    policy.write_text(DEFAULT.read_text().replace(
        'expose = ["get_weather", "add", "search_docs", "echo", "sleep_ms", '
        '"get_cached_config", "fail"]', 'expose = ["*"]'))
    html_path = tmp_path / "report.html"

    def cli():
        env = {**os.environ, "COLUMNS": "200"}
        return subprocess.run([sys.executable, "-m", "codemode", "eval", str(corpus),
                               "--policy", str(policy), "--json", "--html", str(html_path)],
                              capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)

    first = cli()
    assert first.returncode == 0, first.stderr
    assert [(r["id"], r["outcome"]) for r in json.loads(first.stdout)["results"]] == [
        ("ok", "ran-ok")]
    write_case(corpus / "new", "leak.py", {"id": "leak", "category": "bridge-abuse",
                                           "oracle": "tool:hidden"},
               'call_tool("admin_delete_all")\n')
    second = cli()
    assert second.returncode == 1, second.stderr
    report = json.loads(second.stdout)
    assert sorted((r["id"], r["outcome"]) for r in report["results"]) == [
        ("leak", "escaped"), ("ok", "ran-ok")]
    assert report["totals"] == {"escaped": 1, "ran-ok": 1}
    page = html_path.read_text()
    assert "<svg" in page and "leak" in page
    assert "src=" not in page and "<link" not in page and "<script" not in page


@pytest.mark.slow
def test_a_case_the_type_check_refuses_is_blocked_not_host_affected(tmp_path):
    corpus = tmp_path / "corpus"
    write_case(corpus, "typo.py", {"id": "typo", "category": "bridge-abuse",
                                   "oracle": "tool:hidden"},
               'add(a=1, b=2)\nadd(a="one", b=2)\n')
    done = subprocess.run([sys.executable, "-m", "codemode", "eval", str(corpus),
                           "--policy", str(DEFAULT), "--json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    [result] = json.loads(done.stdout)["results"]
    assert result["outcome"] == "blocked", result
    [phase] = result["phases"]
    assert (phase["status"], phase["error_kind"], phase["subcalls"]) == ("error", "type-check", 0)


def test_cli_reports_an_invalid_policy(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[limits]\nfuel = 0\n")
    done = subprocess.run([sys.executable, "-m", "codemode", "eval", str(tmp_path),
                           "--policy", str(bad)], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, "COLUMNS": "250"})
    assert done.returncode == 2
    assert f"{bad}: limits.fuel: Expected 'int' >= 1" in done.stderr


# ---- the shipped corpus --------------------------------------------------------------------

CATEGORIES = {"fs-read", "fs-write", "network", "env-secrets", "process", "import",
              "introspection-escape", "format-string", "resource-cpu", "resource-memory",
              "resource-recursion", "resource-output", "bridge-abuse", "denial-handling",
              "state-leak", "data-flow", "benign"}
PLAIN_ORACLES = {"leak:file", "leak:env", "leak:key", "leak:argv", "leak:state", "fs:write",
                 "ro:modified", "net:connect", "proc:marker", "host:poisoned",
                 "host:bridge-tampered", "tool:hidden", "tool:live", "tool:nonjson",
                 "tool:reserved", "tool:reentrant", "tool:after-return", "tool:after-limit",
                 "time", "mem", "out", "stdout-equals-reference", "flow:sink"}
PARAMETERIZED_ORACLE = re.compile(r"(tool:budget:\d+|tool:argsize:\d+|time:\d+(\.\d+)?|p2:\S.*)")
REFERENCE_TOOLS = {"get_weather", "add", "search_docs", "echo", "sleep_ms",
                   "get_cached_config", "fail"}
PLACEHOLDERS = {"CANARY_READ", "CANARY_WRITE", "MARKER", "PORT", "STATE_TOKEN", "RO_HOST"}


def test_every_shipped_case_has_a_complete_header_and_known_names():
    cases = load_corpus([CORPUS])
    assert len(cases) >= 60
    assert {c.category for c in cases} == CATEGORIES
    for case in cases:
        where = Path(case.path).relative_to(CORPUS)
        assert Path(case.path).stem == case.id, where
        assert case.expect and case.origin and case.oracles, where
        assert case.category in CATEGORIES, where
        assert (where.parts[0] == "benign") == case.benign, where
        unknown = [o for o in case.oracles
                   if o not in PLAIN_ORACLES and not PARAMETERIZED_ORACLE.fullmatch(o)]
        assert unknown == [], where
        if case.benign:
            assert case.oracles == ("stdout-equals-reference",), where
        else:
            assert "stdout-equals-reference" not in case.oracles, where
        assert case.placeholders() <= PLACEHOLDERS, where
        for item in case.labels:                  # `tool=label`, tools of the reference set
            tool, _, label = item.partition("=")
            assert tool in REFERENCE_TOOLS and label, where
        assert bool(case.labels) == (case.category == "data-flow"), where
        assert case.source.count("@@") == 2 * len(PLACEHOLDER.findall(case.source)), where
        two_phase = len(case.phases) == 2
        assert two_phase == bool(PHASE_SPLIT.search(case.source)), where
        if any(o == "leak:state" or o.startswith("p2:") for o in case.oracles):
            assert two_phase, where
        if two_phase:
            compile(case.phases[0], str(where), "exec")
            compile(case.phases[1], str(where), "exec")
        else:
            compile(case.source, str(where), "exec")


SUBSET = ["benign/benign-trip-weather-report.py", "benign/benign-tool-errors-handled.py",
          "benign/benign-json-report-roundtrip.py", "fsr-open-family.py",
          "intro-subclasses-gadget-hunt.py", "bridge-reserved-token-keys.py",
          "bridge-raw-wire-forgery.py", "out-tampered-guest-caps.py",
          "state-tool-held-config.py", "flow-exfil-call-tool-and-gather.py"]


@pytest.mark.slow
def test_shipped_corpus_subset_under_the_default_policy_in_the_wasm_tier():
    cases = load_corpus([CORPUS / name for name in SUBSET])
    results = by_id(evaluate(cases, fast_policy()))
    assert len(results) == len(SUBSET)
    failing = {i: r.reason for i, r in results.items() if r.outcome in ("escaped", "host-affected")}
    assert failing == {}
    # The tampered capture swallows the program's own output: nothing past the limit (nothing
    # at all) reaches the host, and the run completes.
    assert {i: r.outcome for i, r in results.items() if r.outcome not in ("blocked", "ran-ok")} \
        == {}
    assert {i for i, r in results.items() if r.outcome == "ran-ok"} == {
        "benign-trip-weather-report", "benign-tool-errors-handled", "benign-json-report-roundtrip"}
    assert all(r.latency_ms > 0 for r in results.values())


def test_report_formats_over_real_results():
    cases = load_corpus([CORPUS / "fsr-open-family.py",
                         CORPUS / "benign" / "benign-text-analysis.py",
                         CORPUS / "benign" / "benign-json-report-roundtrip.py"])
    results = evaluate(cases, fast_policy(), jobs=2)
    report = EvalReport.build(policy="default.toml", tier="wasm", jobs=2, duration_s=1.0,
                              results=results)
    data = json.loads(to_json(report))
    assert data["summary"]["fs-read"] == {"blocked": 1}
    assert sum(data["totals"].values()) == len(cases) and data["failed"] is False
    page = to_html(report)
    assert page.count("<rect") >= len(data["summary"]) and "fs-read" in page


def test_a_worker_that_dies_is_host_affected_and_replaced(tmp_path, monkeypatch):
    """The worker is killed (SIGSEGV) while it serves the first case: that case is
    host-affected and the next one runs in a fresh worker."""
    from codemode._eval import _slot
    corpus = tmp_path / "corpus"
    for name in ("a", "b"):
        write_case(corpus, f"{name}.py", {"id": name, "category": "benign"}, f"print({name!r})\n")
    send = _slot._Worker.send
    killed: list[str] = []

    def send_then_crash(self, job):
        send(self, job)
        if not killed:
            killed.append(job.case_id)
            os.kill(self.proc.pid, signal.SIGSEGV)

    monkeypatch.setattr(_slot._Worker, "send", send_then_crash)
    first, second = evaluate(load_corpus([corpus]), fast_policy())
    assert (first.outcome, [(f.oracle, f.detail) for f in first.fired]) == (
        "host-affected", [("worker:died", "the worker died (exit status -11)")])
    assert second.outcome == "ran-ok"


@pytest.mark.slow
def test_eval_reports_the_calls_a_quota_refused_per_case_and_per_category(tmp_path):
    corpus = tmp_path / "corpus"
    write_case(corpus, "adds.py", {"id": "adds", "category": "bridge-abuse",
                                   "oracle": "tool:budget:20"},
               "for i in range(5):\n    try:\n        add(a=i, b=1)\n"
               "    except ToolCallError as exc:\n        print(exc.code)\n")
    write_case(corpus, "one.py", {"id": "one", "category": "state-leak",
                                  "oracle": "leak:state"}, "add(a=1, b=2)\n")
    policy = tmp_path / "quota.toml"
    policy.write_text(DEFAULT.read_text() + '\n[[quotas]]\ntool = "add"\nper_run = 2\n')
    done = subprocess.run([sys.executable, "-m", "codemode", "eval", str(corpus),
                           "--policy", str(policy), "--json"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    results = {r["id"]: r for r in report["results"]}
    assert (results["adds"]["outcome"], results["adds"]["quota_refusals"]) == ("blocked", 3)
    assert "3x QUOTA_EXCEEDED: quota exceeded for tool" in results["adds"]["reason"]
    assert results["one"]["quota_refusals"] == 0
    assert report["quota_refusals"] == {"bridge-abuse": 3}
    table = subprocess.run([sys.executable, "-m", "codemode", "eval", str(corpus),
                            "--policy", str(policy)], capture_output=True, text=True,
                           timeout=300, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
    assert table.returncode == 0, table.stderr
    assert "calls over quota" in table.stdout and "over quota" in table.stdout
