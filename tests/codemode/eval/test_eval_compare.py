"""`codemode eval` with several policies: the comparison (per case, per category, false
positives, cost), in the terminal, JSON and HTML, and the exit status."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from codemode._eval import EXIT_FAILED, EXIT_OK, CaseResult
from codemode._eval._command import _compared
from codemode._eval._compare import Comparison, counts_text, print_comparison
from codemode._eval._report import EvalReport

ROOT = Path(__file__).resolve().parents[3]
DEFAULT = ROOT / "fixtures" / "policies" / "default.toml"


def result(case_id, category, outcome, **cost):
    return CaseResult(id=case_id, category=category, path=f"{case_id}.py", oracles=(),
                      outcome=outcome, reason=f"{case_id} {outcome}", **cost)


def report(policy, outcomes, tier="wasm", **cost):
    results = [result(i, c, o, **cost) for i, c, o in outcomes]
    return EvalReport.build(policy=policy, tier=tier, jobs=1, duration_s=2.0, results=results)


A = report("p/loose.toml", [("a", "fs-read", "blocked"), ("b", "benign", "ran-ok"),
                            ("c", "resource-cpu", "limit"), ("d", "benign", "ran-ok")],
           latency_ms=10.0, subcalls=2, mem_growth_bytes=3 << 20)
B = report("q/tight.toml", [("a", "fs-read", "blocked"), ("b", "benign", "wrong-output"),
                            ("c", "resource-cpu", "blocked"), ("d", "benign", "ran-ok")],
           latency_ms=5.0, subcalls=1, fuel_used=100)


def test_comparison_puts_differences_first_and_counts_side_by_side():
    comparison = Comparison.build([A, B])
    assert comparison.labels == ("loose", "tight")
    assert [(r.id, r.outcomes, r.differs) for r in comparison.cases] == [
        ("b", ("ran-ok", "wrong-output"), True), ("c", ("limit", "blocked"), True),
        ("a", ("blocked", "blocked"), False), ("d", ("ran-ok", "ran-ok"), False)]
    assert comparison.differing == 2
    assert comparison.categories["resource-cpu"] == ({"limit": 1}, {"blocked": 1})
    assert comparison.categories["benign"] == ({"ran-ok": 2}, {"ran-ok": 1, "wrong-output": 1})
    assert comparison.false_positives == ((), ("b",))
    loose, tight = comparison.costs
    assert (loose.latency_ms, loose.subcalls, loose.fuel_used, loose.mem_growth_max_bytes) == (
        40.0, 8, None, 3 << 20)
    assert (tight.latency_ms, tight.subcalls, tight.fuel_used) == (20.0, 4, 400)
    assert comparison.failed is False
    assert counts_text({"blocked": 3, "escaped": 1}) == "1 escaped, 3 blocked"


def test_same_policy_file_in_two_tiers_gets_two_labels():
    comparison = Comparison.build([A, report("p/loose.toml", [
        ("a", "fs-read", "blocked"), ("b", "benign", "ran-ok"), ("c", "resource-cpu", "limit"),
        ("d", "benign", "ran-ok")], tier="restricted")])
    assert comparison.labels == ("loose (wasm)", "loose (restricted)")


def test_terminal_comparison_shows_the_differing_cases_and_the_cost():
    console = Console(record=True, width=200)
    print_comparison(Comparison.build([A, B]), console)
    text = console.export_text()
    assert "cases: 2 of 4 end differently (marked ≠, listed first)" in text
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert [row.split("│")[2].strip() for row in rows[:4]] == ["b", "c", "a", "d"]
    assert rows[0].split("│")[1].strip() == "≠" and rows[2].split("│")[1].strip() == ""
    assert "✔ ran-ok" in text and "≠ wrong-output" in text
    assert "not metered" in text and "400" in text
    assert "benign programs tight refused: b" in text
    assert "no policy let a case escape or affect the host" in text


def test_exit_status_is_1_when_any_policy_lets_a_case_escape(capsys):
    escaped = report("r/open.toml", [("a", "fs-read", "escaped"), ("b", "benign", "ran-ok"),
                                     ("c", "resource-cpu", "limit"), ("d", "benign", "ran-ok")])
    console = Console(record=True, width=200)
    assert _compared([A, escaped], as_json=False, html_path=None, console=console) == EXIT_FAILED
    assert "a policy let a case escape or affect the host" in console.export_text()
    assert _compared([A, B], as_json=False, html_path=None, console=console) == EXIT_OK


def write_case(directory, name, header, body):
    directory.mkdir(parents=True, exist_ok=True)
    lines = [f"# {key}: {value}" for key, value in header.items()]
    (directory / name).write_text("\n".join(lines) + "\n" + textwrap.dedent(body).lstrip("\n"))


@pytest.mark.slow
def test_cli_compares_two_policies_that_differ_by_known_cases(tmp_path):
    """The second policy denies `echo`: the benign case using it is refused there (a false
    positive), the others end the same under both."""
    corpus = tmp_path / "corpus"
    write_case(corpus, "uses-echo.py", {"id": "uses-echo", "category": "benign",
                                        "oracle": "stdout-equals-reference"},
               'print(echo(value="hi")["value"])\n')
    write_case(corpus, "adds.py", {"id": "adds", "category": "benign",
                                   "oracle": "stdout-equals-reference"},
               "print(add(a=2, b=3))\n")
    write_case(corpus, "hidden.py", {"id": "hidden", "category": "bridge-abuse",
                                     "oracle": "tool:hidden"},
               'try:\n    call_tool("read_secret")\n'
               'except ToolCallError as e:\n    print(e.code)\n')
    base = DEFAULT.read_text().replace("wall_clock_s = 5.0", "wall_clock_s = 2.0")
    loose, tight = tmp_path / "loose.toml", tmp_path / "tight.toml"
    loose.write_text(base)
    tight.write_text(base + '\n[[rules]]\ntool = "echo"\naction = "deny"\n'
                            'reason = "echo is off under this policy"\n')
    html_path = tmp_path / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "codemode", "eval", str(corpus), "--policy", str(loose),
         "--policy", str(tight), "--json", "--html", str(html_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [r["policy"] for r in data["reports"]] == [str(loose), str(tight)]
    comparison = data["comparison"]
    assert comparison["labels"] == ["loose", "tight"]
    assert [(c["id"], c["outcomes"]) for c in comparison["cases"]] == [
        ("uses-echo", ["ran-ok", "wrong-output"]), ("adds", ["ran-ok", "ran-ok"]),
        ("hidden", ["blocked", "blocked"])]
    assert comparison["differing"] == 1
    assert comparison["false_positives"] == [[], ["uses-echo"]]
    assert [c["subcalls"] for c in comparison["costs"]] == [3, 3]
    assert comparison["failed"] is False
    page = html_path.read_text()
    assert "<h2>Comparison</h2>" in page and "<th>loose</th><th>tight</th>" in page
    assert 'class="diff"' in page and 'class="o o-wrong-output"' in page
    assert "<script" not in page and "<link" not in page
