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

from ._classify import FAILING, OUTCOMES
from ._runner import CaseResult

# Case ids, categories and reasons come from corpus files: show control and invisible
# characters (an ESC in a file name must not reach the terminal or the report) as escapes.
_UNPRINTABLE = {c: f"\\u{c:04x}" for c in (*range(0x00, 0x20), *range(0x7f, 0xa0),
                                             *range(0x200b, 0x2010), *range(0x2028, 0x202f),
                                             *range(0x2066, 0x206a), 0xfeff)}


def printable(text: str) -> str:
    return text.translate(_UNPRINTABLE)

COLORS = {"escaped": "#c0392b", "host-affected": "#e67e22", "limit": "#2980b9",
          "blocked": "#27ae60", "ran-ok": "#16a085", "wrong-output": "#8e44ad"}
_RICH = {"escaped": "bold red", "host-affected": "bold yellow", "limit": "blue",
         "blocked": "green", "ran-ok": "green", "wrong-output": "magenta"}


class EvalReport(msgspec.Struct, frozen=True, kw_only=True):
    """A whole evaluation.

    Attributes:
        policy: the policy file; tier: the tier the cases ran in.
        duration_s: wall-clock seconds of the evaluation.
        results: one per case, in corpus order.
        summary: category -> outcome -> number of cases.
        totals: outcome -> number of cases.
        failed: some case escaped or affected the host.
    """

    policy: str
    tier: str
    jobs: int
    duration_s: float
    results: tuple[CaseResult, ...]
    summary: dict[str, dict[str, int]]
    totals: dict[str, int]
    failed: bool

    @classmethod
    def build(cls, *, policy: str, tier: str, jobs: int, duration_s: float,
              results: Sequence[CaseResult]) -> EvalReport:
        summary: dict[str, dict[str, int]] = {}
        for result in results:
            row = summary.setdefault(result.category, {})
            row[result.outcome] = row.get(result.outcome, 0) + 1
        totals = dict(Counter(r.outcome for r in results))
        return cls(policy=policy, tier=tier, jobs=jobs, duration_s=duration_s,
                   results=tuple(results), summary=dict(sorted(summary.items())),
                   totals={o: totals[o] for o in OUTCOMES if o in totals},
                   failed=any(r.outcome in FAILING for r in results))


def to_json(report: EvalReport) -> bytes:
    """The report as JSON (stdout of the phases left out: they can be large)."""
    data = msgspec.to_builtins(report)
    for result in data["results"]:
        for phase in result.get("phases", ()):
            phase.pop("stdout", None)
    return msgspec.json.format(msgspec.json.encode(data), indent=2)


def case_table(results: Sequence[CaseResult]) -> Table:
    """One row per case: id, category, declared oracles, outcome, cost, reason."""
    table = Table(title="cases", title_justify="left")
    table.add_column("case")
    table.add_column("category")
    table.add_column("expected (oracles)", overflow="fold")
    table.add_column("outcome")
    table.add_column("ms", justify="right")
    metered = any(r.fuel_used is not None for r in results)
    if metered:
        table.add_column("fuel", justify="right")
    table.add_column("why", overflow="fold")
    for r in results:
        cost = [f"{r.latency_ms:.0f}"]
        if metered:
            cost.append("" if r.fuel_used is None else f"{r.fuel_used:,}")
        table.add_row(escape(printable(r.id)), escape(printable(r.category)),
                      escape(printable(", ".join(r.oracles))),
                      f"[{_RICH[r.outcome]}]{r.outcome}[/]", *cost,
                      escape(printable(r.reason[:160])))
    return table


def summary_table(report: EvalReport) -> Table:
    present = [o for o in OUTCOMES if o in report.totals]
    table = Table(title=f"per category ({report.tier} tier, {report.policy})",
                  title_justify="left")
    table.add_column("category")
    for outcome in present:
        table.add_column(outcome, justify="right")
    for category, row in report.summary.items():
        table.add_row(category, *[str(row.get(o, "")) for o in present])
    table.add_row("[bold]total[/]", *[f"[bold]{report.totals.get(o, 0)}[/]" for o in present])
    return table


def print_report(report: EvalReport, console: Console) -> None:
    console.print(case_table(report.results))
    console.print(summary_table(report))
    escaped = report.totals.get("escaped", 0)
    affected = report.totals.get("host-affected", 0)
    style = "bold red" if report.failed else "bold green"
    console.print(f"[{style}]{len(report.results)} cases in {report.duration_s:.1f} s: "
                  f"{escaped} escaped, {affected} affected the host[/]")


def _chart(report: EvalReport) -> str:
    """Horizontal stacked bars, one per category, segments per outcome (inline SVG)."""
    bar_w, row_h, label_w = 420, 26, 190
    rows = list(report.summary.items())
    height = row_h * len(rows) + 40
    most = max((sum(r.values()) for _, r in rows), default=1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 60}" '
             f'height="{height}" role="img" aria-label="outcomes per category">']
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
                         f'fill="{COLORS[outcome]}"><title>{html.escape(printable(category))}: '
                         f'{count} {outcome}</title></rect>')
            if width >= 14:
                parts.append(f'<text x="{x + width / 2:.1f}" y="{y + 16}" text-anchor="middle" '
                             f'font-size="11" fill="#fff">{count}</text>')
            x += width
    legend_y = 10 + len(rows) * row_h + 14
    x = 10.0
    for outcome in OUTCOMES:
        parts.append(f'<rect x="{x:.0f}" y="{legend_y - 10}" width="12" height="12" '
                     f'fill="{COLORS[outcome]}"/><text x="{x + 16:.0f}" y="{legend_y}" '
                     f'font-size="11">{outcome}</text>')
        x += 16 + 7 * len(outcome) + 14
    parts.append("</svg>")
    return "".join(parts)


def to_html(report: EvalReport) -> str:
    """A self-contained HTML page: headline, chart, summary and the case table."""
    def esc(text: str) -> str:
        return html.escape(printable(text))
    present = [o for o in OUTCOMES if o in report.totals]
    summary_rows = "".join(
        f"<tr><td>{esc(c)}</td>" + "".join(f"<td class=n>{row.get(o, '')}</td>" for o in present)
        + "</tr>" for c, row in report.summary.items())
    case_rows = "".join(
        f'<tr><td>{esc(r.id)}</td><td>{esc(r.category)}</td><td>{esc(", ".join(r.oracles))}</td>'
        f'<td><span class=tag style="background:{COLORS[r.outcome]}">{r.outcome}</span></td>'
        f'<td class=n>{r.latency_ms:.0f}</td>'
        f'<td class=n>{"" if r.fuel_used is None else r.fuel_used}</td>'
        f'<td class=n>{r.mem_growth_bytes >> 20}</td><td>{esc(r.reason[:300])}</td></tr>'
        for r in report.results)
    verdict = (f"{report.totals.get('escaped', 0)} escaped, "
               f"{report.totals.get('host-affected', 0)} affected the host")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>codemode eval: {esc(report.policy)} ({esc(report.tier)})</title>
<style>
body{{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}}
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ddd;padding:3px 8px;
vertical-align:top}}th{{background:#f4f4f4;text-align:left}}td.n{{text-align:right}}
.tag{{color:#fff;border-radius:3px;padding:1px 6px;white-space:nowrap}}
.bad{{color:#c0392b}}.good{{color:#27ae60}}
</style></head><body>
<h1>codemode eval</h1>
<p>Policy <code>{esc(report.policy)}</code>, tier <b>{esc(report.tier)}</b>,
{len(report.results)} cases, {report.jobs} worker(s), {report.duration_s:.1f} s.
<b class="{'bad' if report.failed else 'good'}">{verdict}</b>.</p>
<h2>Outcomes per category</h2>
{_chart(report)}
<table><tr><th>category</th>{"".join(f"<th>{o}</th>" for o in present)}</tr>
{summary_rows}
<tr><th>total</th>{"".join(f"<th class=n>{report.totals.get(o, 0)}</th>" for o in present)}</tr>
</table>
<h2>Cases</h2>
<table><tr><th>case</th><th>category</th><th>oracles</th><th>outcome</th><th>ms</th>
<th>fuel</th><th>MiB</th><th>why</th></tr>
{case_rows}
</table>
</body></html>
"""
