"""The evaluation report: what stopped each blocked case, outcomes told apart by more than
colour, the fuel column only when fuel is metered, progress lines off a terminal."""

import io
import threading

from rich.console import Console

from codemode._eval import CaseResult, PhaseReport, _command, classify, to_html
from codemode._eval._classify import OUTCOMES
from codemode._eval._report import COLORS, ICONS, EvalReport, outcome_badge, print_report


def test_a_completed_hostile_case_says_what_refused_it():
    phase = PhaseReport(status="ok", refused={"DENIED: not on the allow-list": 2,
                                              "UNKNOWN_TOOL: no tool read_secret": 1},
                        stdout="open: PermissionError\nimport os: ModuleNotFoundError\n"
                               "again: PermissionError\n")
    assert classify(benign=False, fired=[], phases=[phase]) == (
        "blocked", "completed, every attempt refused: host refused 2x DENIED: not on the "
                   "allow-list; 1x UNKNOWN_TOOL: no tool read_secret; the program caught "
                   "2x PermissionError, 1x ModuleNotFoundError")
    assert classify(benign=False, fired=[], phases=[PhaseReport(status="ok")]) == (
        "blocked", "completed, every attempt refused: nothing it tried reached the host")


def test_a_benign_case_that_ran_says_so():
    ok = PhaseReport(status="ok", stdout="PermissionError handled\n")
    assert classify(benign=True, fired=[], phases=[ok], stdout_matches=True) == (
        "ran-ok", "completed; stdout matches native CPython's")


def test_a_case_ended_by_a_limit_or_an_error_names_it():
    limit = PhaseReport(status="limit", error_kind="timeout", error_message="over 5 s\nmore")
    error = PhaseReport(status="error", error_kind="exception",
                        error_message="No module named 'os' (not available in the sandbox)")
    assert classify(benign=False, fired=[], phases=[limit]) == (
        "limit", "limit (timeout): over 5 s")
    assert classify(benign=False, fired=[], phases=[error]) == (
        "blocked", "error (exception): No module named 'os' (not available in the sandbox)")


def test_outcomes_differ_by_icon_text_and_fill_not_only_hue():
    assert len(set(ICONS.values())) == len(OUTCOMES) == len(set(COLORS.values()))
    badges = [outcome_badge(o) for o in OUTCOMES]
    for outcome, badge in zip(OUTCOMES, badges, strict=True):
        assert f"{ICONS[outcome]} {outcome}</span>" in badge
    page = to_html(_report([("a", "escaped", None), ("b", "blocked", None),
                            ("c", "ran-ok", None)]))
    assert ".o-escaped{background:repeating-linear-gradient" in page      # hatched
    assert ".o-blocked{background:#fff" in page                           # outlined
    assert 'url(#hatch-escaped)' in page and 'stroke-width="2"' in page   # chart fills


def _report(rows):
    results = [CaseResult(id=i, category="fs-read", path=f"{i}.py", oracles=(), outcome=o,
                          reason="r", fuel_used=fuel) for i, o, fuel in rows]
    return EvalReport.build(policy="p.toml", tier="wasm", jobs=1, duration_s=1.0,
                            results=results)


def test_the_fuel_column_appears_only_when_fuel_is_metered():
    unmetered = to_html(_report([("a", "blocked", None)]))
    metered = to_html(_report([("a", "blocked", 1234567), ("b", "limit", None)]))
    assert "<th>fuel</th>" not in unmetered
    assert "<th>fuel</th>" in metered and "<td class=n>1,234,567</td>" in metered


def test_progress_lines_when_stderr_is_not_a_terminal(monkeypatch):
    monkeypatch.setattr(_command, "PROGRESS_EVERY_S", 0.05)
    out = io.StringIO()
    console = Console(file=out, width=200)
    assert not console.is_terminal
    lines = _command._ProgressLines(console, "strict", 3)
    printed = threading.Event()
    with lines:
        lines.advance(CaseResult(id="a", category="x", path="a.py", oracles=(),
                                 outcome="limit", reason=""))
        while "1/3" not in out.getvalue():
            printed.wait(0.05)
    assert "eval strict: 1/3 cases," in out.getvalue() and "(1 limit)" in out.getvalue()


def test_calls_over_a_quota_are_counted_per_case_and_per_category():
    results = [CaseResult(id=i, category=c, path=f"{i}.py", oracles=(), outcome="blocked",
                          reason="r", quota_refusals=n)
               for i, c, n in [("a", "fs-read", 2), ("b", "fs-read", 1), ("c", "net", 0)]]
    report = EvalReport.build(policy="p.toml", tier="wasm", jobs=1, duration_s=1.0,
                              results=results)
    assert report.quota_refusals == {"fs-read": 3}
    page = to_html(report)
    assert "<th>over quota</th>" in page and "<td class=n>2</td>" in page
    assert "<th>over quota</th>" not in to_html(_report([("a", "blocked", None)]))
    out = io.StringIO()
    print_report(report, Console(file=out, width=200))
    assert "calls over quota" in out.getvalue() and "over quota" in out.getvalue()
