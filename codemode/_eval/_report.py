"""Reports of an evaluation: a rich table and summary, JSON, and a self-contained HTML page
with a per-category chart (inline SVG, no external assets)."""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .._run.visible import visible
from ._classify import FAILING, OUTCOMES
from ._slot import CaseResult


def printable(text: str) -> str:
    """`text` for one line of a table or the HTML report: case ids, categories and reasons
    come from corpus files and programs, so control, invisible and bidirectional characters
    and line breaks are escapes (`codemode._run.visible`)."""
    return visible(text, lines=False)


# Okabe-Ito colours (distinguishable with the common colour-vision deficiencies), and
# each outcome also differs by icon, text, lightness and fill: failing outcomes are solid
# and hatched, "blocked" is outlined, "ran-ok" is a light fill, "wrong-output" is dashed.
COLORS = {"escaped": "#D55E00", "host-affected": "#E69F00", "limit": "#0072B2",
          "blocked": "#009E73", "ran-ok": "#56B4E9", "wrong-output": "#CC79A7"}
ICONS = {"escaped": "\u2716", "host-affected": "\u26a0", "limit": "\u25f7",
         "blocked": "\u25a0", "ran-ok": "\u2714", "wrong-output": "\u2260"}
_RICH = {"escaped": "bold white on red", "host-affected": "bold black on yellow",
         "limit": "bold blue", "blocked": "green", "ran-ok": "cyan",
         "wrong-output": "bold magenta"}
_BADGE_CSS = """
.o{border-radius:3px;padding:1px 6px;white-space:nowrap;font-weight:600;border:2px solid}
.o-escaped{background:repeating-linear-gradient(45deg,#D55E00 0 6px,#a84a00 6px 9px);
color:#fff;border-color:#7a3500}
.o-host-affected{background:repeating-linear-gradient(45deg,#E69F00 0 6px,#c98b00 6px 9px);
color:#000;border-color:#7a5500}
.o-limit{background:#0072B2;color:#fff;border-color:#0072B2}
.o-blocked{background:#fff;color:#00573f;border-color:#009E73}
.o-ran-ok{background:#d7eefb;color:#00344f;border-color:#56B4E9}
.o-wrong-output{background:#f6e0ec;color:#5c1f43;border-color:#CC79A7;border-style:dashed}
"""


def outcome_markup(outcome: str) -> str:
    """The outcome for the terminal: icon and name, styled (rich markup)."""
    return f"[{_RICH[outcome]}]{ICONS[outcome]} {outcome}[/]"


def outcome_badge(outcome: str) -> str:
    """The outcome for HTML: icon and name in a badge (classes in `_BADGE_CSS`)."""
    return f'<span class="o o-{outcome}">{ICONS[outcome]} {outcome}</span>'


class EvalReport(msgspec.Struct, frozen=True, kw_only=True):
    """A whole evaluation.

    Attributes:
        policy: the policy file; tier: the tier the cases ran in.
        duration_s: wall-clock seconds of the evaluation.
        results: one per case, in corpus order.
        summary: category -> outcome -> number of cases.
        totals: outcome -> number of cases.
        failed: some case escaped or affected the host.
        quota_refusals: category -> calls refused with code QUOTA_EXCEEDED (the policy's
            `[[quotas]]`) in its cases, for the categories with any.
    """

    policy: str
    tier: str
    jobs: int
    duration_s: float
    results: tuple[CaseResult, ...]
    summary: dict[str, dict[str, int]]
    totals: dict[str, int]
    failed: bool
    quota_refusals: dict[str, int] = {}

    @classmethod
    def build(cls, *, policy: str, tier: str, jobs: int, duration_s: float,
              results: Sequence[CaseResult]) -> EvalReport:
        summary: dict[str, dict[str, int]] = {}
        for result in results:
            row = summary.setdefault(result.category, {})
            row[result.outcome] = row.get(result.outcome, 0) + 1
        totals = dict(Counter(r.outcome for r in results))
        quota: Counter[str] = Counter()
        for result in results:
            quota[result.category] += result.quota_refusals
        return cls(policy=policy, tier=tier, jobs=jobs, duration_s=duration_s,
                   results=tuple(results), summary=dict(sorted(summary.items())),
                   totals={o: totals[o] for o in OUTCOMES if o in totals},
                   failed=any(r.outcome in FAILING for r in results),
                   quota_refusals={c: n for c, n in sorted(quota.items()) if n})


def to_json(report: EvalReport) -> bytes:
    """The report as JSON (stdout of the phases left out: they can be large)."""
    data = msgspec.to_builtins(report)
    for result in data["results"]:
        for phase in result.get("phases", ()):
            phase.pop("stdout", None)
    return msgspec.json.format(msgspec.json.encode(data), indent=2)


def case_table(results: Sequence[CaseResult]) -> Table:
    """One row per case: id, category, declared oracles, outcome, cost (ms, fuel when
    metered, calls refused over a quota when any were), reason."""
    table = Table(title="cases", title_justify="left")
    table.add_column("case")
    table.add_column("category")
    table.add_column("expected (oracles)", overflow="fold")
    table.add_column("outcome")
    table.add_column("ms", justify="right")
    metered = any(r.fuel_used is not None for r in results)
    if metered:
        table.add_column("fuel", justify="right")
    quotas = any(r.quota_refusals for r in results)
    if quotas:
        table.add_column("over quota", justify="right")
    table.add_column("why", overflow="fold")
    for r in results:
        cost = [f"{r.latency_ms:.0f}"]
        if metered:
            cost.append("" if r.fuel_used is None else f"{r.fuel_used:,}")
        if quotas:
            cost.append(str(r.quota_refusals or ""))
        table.add_row(escape(printable(r.id)), escape(printable(r.category)),
                      escape(printable(", ".join(r.oracles))),
                      outcome_markup(r.outcome), *cost,
                      escape(printable(r.reason[:160])))
    return table


def summary_table(report: EvalReport) -> Table:
    present = [o for o in OUTCOMES if o in report.totals]
    title = f"per category ({report.tier} tier, {report.policy})"
    table = Table(title=escape(printable(title)), title_justify="left",
                  min_width=len(title))   # the title on one line wherever the width allows
    table.add_column("category")
    for outcome in present:
        table.add_column(outcome, justify="right")
    quota = report.quota_refusals
    if quota:       # calls, not cases: the calls a [[quotas]] entry refused
        table.add_column("calls over quota", justify="right")
    for category, row in report.summary.items():
        table.add_row(category, *[str(row.get(o, "")) for o in present],
                      *([str(quota.get(category, ""))] if quota else []))
    table.add_row("[bold]total[/]", *[f"[bold]{report.totals.get(o, 0)}[/]" for o in present],
                  *([f"[bold]{sum(quota.values())}[/]"] if quota else []))
    return table


def print_report(report: EvalReport, console: Console) -> None:
    console.print(case_table(report.results))
    console.print(summary_table(report))
    escaped = report.totals.get("escaped", 0)
    affected = report.totals.get("host-affected", 0)
    style = "bold red" if report.failed else "bold green"
    console.print(f"[{style}]{len(report.results)} cases in {report.duration_s:.1f} s: "
                  f"{escaped} escaped, {affected} affected the host[/]")


_PATTERNS = {"escaped": "hatch-escaped", "host-affected": "hatch-host"}


def _svg_defs() -> str:
    """Hatch patterns for the failing outcomes (so they differ by more than colour)."""
    return ("<defs>" + "".join(
        f'<pattern id="{pid}" width="8" height="8" patternUnits="userSpaceOnUse" '
        f'patternTransform="rotate(45)"><rect width="8" height="8" fill="{COLORS[o]}"/>'
        f'<rect width="3" height="8" fill="#000" fill-opacity="0.35"/></pattern>'
        for o, pid in _PATTERNS.items()) + "</defs>")


def _fill(outcome: str) -> str:
    if outcome in _PATTERNS:
        return f'fill="url(#{_PATTERNS[outcome]})"'
    if outcome == "blocked":
        return f'fill="#fff" stroke="{COLORS[outcome]}" stroke-width="2"'
    if outcome == "wrong-output":
        return f'fill="{COLORS[outcome]}" stroke="#5c1f43" stroke-dasharray="4 2"'
    return f'fill="{COLORS[outcome]}"'


_TEXT_ON = {"escaped": "#fff", "host-affected": "#000", "limit": "#fff", "blocked": "#00573f",
            "ran-ok": "#00344f", "wrong-output": "#000"}


def _chart(report: EvalReport) -> str:
    """Horizontal stacked bars, one per category, segments per outcome (inline SVG); each
    segment has its outcome's fill style and a count label, and the legend names them."""
    bar_w, row_h, label_w = 420, 26, 190
    rows = list(report.summary.items())
    height = row_h * len(rows) + 40
    most = max((sum(r.values()) for _, r in rows), default=1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 60}" '
             f'height="{height}" role="img" aria-label="outcomes per category">', _svg_defs()]
    for i, (category, row) in enumerate(rows):
        y = 10 + i * row_h
        parts.append(f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end" '
                     f'font-size="13">{html.escape(printable(category))}</text>')
        x = float(label_w)
        for outcome in OUTCOMES:
            count = row.get(outcome, 0)
            if not count:
                continue
            width = bar_w * count / most
            parts.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{width:.1f}" height="{row_h - 8}" '
                         f'{_fill(outcome)}><title>{html.escape(printable(category))}: '
                         f'{count} {outcome}</title></rect>')
            if width >= 24:
                parts.append(f'<text x="{x + width / 2:.1f}" y="{y + 16}" text-anchor="middle" '
                             f'font-size="11" font-weight="bold" fill="{_TEXT_ON[outcome]}">'
                             f'{ICONS[outcome]}{count}</text>')
            x += width
    legend_y = 10 + len(rows) * row_h + 14
    x = 10.0
    for outcome in OUTCOMES:
        parts.append(f'<rect x="{x:.0f}" y="{legend_y - 10}" width="14" height="12" '
                     f'{_fill(outcome)}/><text x="{x + 18:.0f}" y="{legend_y}" '
                     f'font-size="11">{ICONS[outcome]} {outcome}</text>')
        x += 30 + 7 * len(outcome) + 14
    parts.append("</svg>")
    return "".join(parts)


def _esc(text: str) -> str:
    return html.escape(printable(text))


def report_section(report: EvalReport, *, heading: str | None = None) -> str:
    """One evaluation as an HTML section: headline, chart, per-category counts and the
    case table (the fuel column only when the policy meters fuel, the over-quota one only
    when a quota refused a call)."""
    present = [o for o in OUTCOMES if o in report.totals]
    metered = any(r.fuel_used is not None for r in report.results)
    quotas = bool(report.quota_refusals)
    summary_rows = "".join(
        f"<tr><td>{_esc(c)}</td>" + "".join(f"<td class=n>{row.get(o, '')}</td>" for o in present)
        + "</tr>" for c, row in report.summary.items())
    case_rows = "".join(
        f'<tr><td>{_esc(r.id)}</td><td>{_esc(r.category)}</td><td>{_esc(", ".join(r.oracles))}</td>'
        f'<td>{outcome_badge(r.outcome)}</td>'
        f'<td class=n>{r.latency_ms:.0f}</td>'
        + (f'<td class=n>{"" if r.fuel_used is None else f"{r.fuel_used:,}"}</td>'
           if metered else "")
        + (f"<td class=n>{r.quota_refusals or ''}</td>" if quotas else "")
        + f'<td class=n>{r.mem_growth_bytes >> 20}</td><td>{_esc(r.reason[:300])}</td></tr>'
        for r in report.results)
    verdict = (f"{report.totals.get('escaped', 0)} escaped, "
               f"{report.totals.get('host-affected', 0)} affected the host")
    title = heading or "Outcomes per category"
    return f"""<h2>{_esc(title)}</h2>
<p>Policy <code>{_esc(report.policy)}</code>, tier <b>{_esc(report.tier)}</b>,
{len(report.results)} cases, {report.jobs} worker(s), {report.duration_s:.1f} s.
<b class="{'bad' if report.failed else 'good'}">{verdict}</b>.</p>
{_chart(report)}
<table><tr><th>category</th>{"".join(f"<th>{outcome_badge(o)}</th>" for o in present)}</tr>
{summary_rows}
<tr><th>total</th>{"".join(f"<th class=n>{report.totals.get(o, 0)}</th>" for o in present)}</tr>
</table>
<details{" open" if heading is None else ""}><summary>Cases ({len(report.results)})</summary>
<table class=cases><tr><th>case</th><th>category</th><th>oracles</th><th>outcome</th><th>ms</th>
{"<th>fuel</th>" if metered else ""}{"<th>over quota</th>" if quotas else ""}
<th>mem MiB</th><th>what stopped it / why</th></tr>
{case_rows}
</table></details>
"""


def page(title: str, body: str) -> str:
    """A self-contained HTML page (inline CSS and SVG; no scripts, links or images)."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{_esc(title)}</title>
<style>
body{{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}}
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px 8px;
vertical-align:top}}th{{background:#f4f4f4;text-align:left}}td.n{{text-align:right}}
.bad{{color:#b34700}}.good{{color:#00573f}}.why{{color:#555;font-size:12px;max-width:32em}}
tr.diff td:first-child{{border-left:5px solid #000;font-weight:600}}
summary{{cursor:pointer;font-weight:600;margin:.5em 0}}
{_BADGE_CSS}
</style></head><body>
<h1>{_esc(title)}</h1>
{body}
</body></html>
"""


def to_html(report: EvalReport) -> str:
    """A self-contained HTML page: headline, chart, summary and the case table."""
    return page(f"codemode eval: {report.policy} ({report.tier})", report_section(report))
