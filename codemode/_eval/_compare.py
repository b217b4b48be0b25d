"""Several policies over one corpus, side by side (`codemode eval --policy A --policy B`).

`Comparison.build` takes one `EvalReport` per policy (the same cases, in the same order)
and derives: per case the outcome under each policy, the cases whose outcomes differ first;
per category the outcome counts of each policy; the benign programs each policy refused
(false positives: a benign case that did not run as native CPython does); and what each
policy cost (wall time, fuel, memory growth, sub-calls).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ._classify import OUTCOMES
from ._report import EvalReport, outcome_badge, outcome_markup, printable


class PolicyCost(msgspec.Struct, frozen=True, kw_only=True):
    """What one policy's run of the corpus cost.

    Attributes:
        label: the policy's name in the comparison (its file's stem, and tier if needed).
        duration_s: wall-clock seconds of the whole evaluation.
        latency_ms: milliseconds of all `run_code` calls, summed over cases.
        fuel_used: fuel summed over cases when the policy meters it, else None.
        mem_growth_max_bytes: the largest worker memory growth of any case.
        subcalls: sub-calls summed over cases.
    """

    label: str
    policy: str
    tier: str
    duration_s: float
    latency_ms: float
    fuel_used: int | None
    mem_growth_max_bytes: int
    subcalls: int
    escaped: int
    host_affected: int


class CaseRow(msgspec.Struct, frozen=True, kw_only=True):
    """One case under every policy (`outcomes[i]`, `reasons[i]` for policy i)."""

    id: str
    category: str
    outcomes: tuple[str, ...]
    reasons: tuple[str, ...]
    differs: bool


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    """Policies side by side.

    Attributes:
        labels: one per policy, in command-line order.
        cases: every case, those whose outcomes differ first (then corpus order).
        categories: category -> one `{outcome: count}` per policy.
        false_positives: per policy, the ids of benign cases it did not run correctly.
        costs: one per policy.
        failed: some policy let a case escape or affect the host.
    """

    labels: tuple[str, ...]
    cases: tuple[CaseRow, ...]
    categories: dict[str, tuple[dict[str, int], ...]]
    false_positives: tuple[tuple[str, ...], ...]
    costs: tuple[PolicyCost, ...]
    differing: int
    failed: bool

    @classmethod
    def build(cls, reports: Sequence[EvalReport]) -> Comparison:
        """Raises:
            ValueError: the reports are not over the same cases."""
        ids = [tuple(r.id for r in report.results) for report in reports]
        if any(i != ids[0] for i in ids):
            raise ValueError("the reports are not over the same cases")
        labels = _labels(reports)
        rows = []
        for index, first in enumerate(reports[0].results):
            results = [report.results[index] for report in reports]
            outcomes = tuple(r.outcome for r in results)
            rows.append(CaseRow(id=first.id, category=first.category, outcomes=outcomes,
                                reasons=tuple(r.reason for r in results),
                                differs=len(set(outcomes)) > 1))
        rows.sort(key=lambda row: not row.differs)            # stable: corpus order within
        categories = {category: tuple(report.summary.get(category, {}) for report in reports)
                      for category in reports[0].summary}
        false_positives = tuple(
            tuple(r.id for r in report.results if r.category == "benign"
                  and r.outcome != "ran-ok") for report in reports)
        costs = tuple(_cost(label, report) for label, report in zip(labels, reports, strict=True))
        return cls(labels=labels, cases=tuple(rows), categories=categories,
                   false_positives=false_positives, costs=costs,
                   differing=sum(row.differs for row in rows),
                   failed=any(report.failed for report in reports))


def _labels(reports: Sequence[EvalReport]) -> tuple[str, ...]:
    stems = [Path(report.policy).stem for report in reports]
    labels = [stem if stems.count(stem) == 1 else f"{stem} ({report.tier})"
              for stem, report in zip(stems, reports, strict=True)]
    return tuple(label if labels.count(label) == 1 else f"{label} #{i + 1}"
                 for i, label in enumerate(labels))


def _cost(label: str, report: EvalReport) -> PolicyCost:
    fuel = [r.fuel_used for r in report.results if r.fuel_used is not None]
    return PolicyCost(
        label=label, policy=report.policy, tier=report.tier, duration_s=report.duration_s,
        latency_ms=sum(r.latency_ms for r in report.results),
        fuel_used=sum(fuel) if fuel else None,
        mem_growth_max_bytes=max((r.mem_growth_bytes for r in report.results), default=0),
        subcalls=sum(r.subcalls for r in report.results),
        escaped=report.totals.get("escaped", 0),
        host_affected=report.totals.get("host-affected", 0))


def counts_text(counts: dict[str, int]) -> str:
    """`{"blocked": 3, "limit": 1}` as "3 blocked, 1 limit" (worst first)."""
    return ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts.get(o))


def _count_badges(counts: dict[str, int]) -> str:
    return " ".join(f"{counts[o]}&nbsp;{outcome_badge(o)}" for o in OUTCOMES if counts.get(o))


def _fuel_text(fuel: int | None) -> str:
    return "not metered" if fuel is None else f"{fuel:,}"


# ---- terminal ----------------------------------------------------------------------------

def print_comparison(comparison: Comparison, console: Console, *,
                     all_cases: bool = True) -> None:
    """Every case (only those that differ with `all_cases=False`), the differing ones first
    and marked, per category side by side, false positives, cost per policy, and the
    verdict."""
    labels = [escape(printable(label)) for label in comparison.labels]
    shown = comparison.cases if all_cases else [r for r in comparison.cases if r.differs]
    title = (f"cases: {comparison.differing} of {len(comparison.cases)} end differently "
             "(marked \u2260, listed first)")
    table = Table(title=title, title_justify="left",
                  min_width=len(title))   # the title on one line wherever the width allows
    table.add_column("", width=1)
    table.add_column("case")
    table.add_column("category")
    for label in labels:
        table.add_column(label)
    for row in shown:
        table.add_row("\u2260" if row.differs else "", escape(printable(row.id)),
                      escape(printable(row.category)),
                      *[outcome_markup(o) for o in row.outcomes],
                      style="bold" if row.differs else None)
    console.print(table)

    per_category = Table(title="per category", title_justify="left")
    per_category.add_column("category")
    for label in labels:
        per_category.add_column(label, overflow="fold")
    for category, counts in comparison.categories.items():
        per_category.add_row(escape(printable(category)), *[counts_text(c) for c in counts])
    console.print(per_category)

    cost = Table(title="cost and verdict per policy", title_justify="left")
    for column in ("policy", "tier", "wall s", "run ms", "fuel", "max mem MiB", "sub-calls",
                   "benign refused", "escaped", "host-affected"):
        cost.add_column(column, justify="left" if column in ("policy", "tier") else "right")
    for c, refused in zip(comparison.costs, comparison.false_positives, strict=True):
        bad = c.escaped or c.host_affected
        cost.add_row(escape(printable(c.label)), c.tier, f"{c.duration_s:.1f}",
                     f"{c.latency_ms:,.0f}", _fuel_text(c.fuel_used),
                     f"{c.mem_growth_max_bytes >> 20}", f"{c.subcalls:,}", str(len(refused)),
                     f"[{'bold red' if bad else 'green'}]{c.escaped}[/]",
                     f"[{'bold red' if bad else 'green'}]{c.host_affected}[/]")
    console.print(cost)
    for label, refused in zip(labels, comparison.false_positives, strict=True):
        if refused:
            console.print(f"benign programs {label} refused: "
                          + escape(printable(", ".join(refused))))
    style = "bold red" if comparison.failed else "bold green"
    console.print(f"[{style}]{len(comparison.costs)} policies over {len(comparison.cases)} "
                  f"cases: {comparison.differing} differ; "
                  + ("a policy let a case escape or affect the host" if comparison.failed
                     else "no policy let a case escape or affect the host") + "[/]")


# ---- HTML --------------------------------------------------------------------------------

def comparison_html(comparison: Comparison) -> str:
    """The comparison as an HTML section (no page around it; `_report.page` wraps it)."""
    def esc(text: str) -> str:
        return html.escape(printable(text))
    heads = "".join(f"<th>{esc(label)}</th>" for label in comparison.labels)
    case_rows = "".join(
        f'<tr class="{"diff" if row.differs else "same"}"><td>{esc(row.id)}</td>'
        f'<td>{esc(row.category)}</td>'
        + "".join(f"<td>{outcome_badge(o)}<div class=why>{esc(reason[:200])}</div></td>"
                  for o, reason in zip(row.outcomes, row.reasons, strict=True))
        + "</tr>" for row in comparison.cases)
    category_rows = "".join(
        f"<tr><td>{esc(category)}</td>"
        + "".join(f"<td>{_count_badges(c)}</td>" for c in counts) + "</tr>"
        for category, counts in comparison.categories.items())
    cost_rows = "".join(
        f"<tr><td>{esc(c.label)}</td><td>{esc(c.tier)}</td><td class=n>{c.duration_s:.1f}</td>"
        f"<td class=n>{c.latency_ms:,.0f}</td><td class=n>{_fuel_text(c.fuel_used)}</td>"
        f"<td class=n>{c.mem_growth_max_bytes >> 20}</td><td class=n>{c.subcalls:,}</td>"
        f"<td>{esc(', '.join(refused)) or '&mdash;'}</td>"
        f'<td class=n>{c.escaped}</td><td class=n>{c.host_affected}</td></tr>'
        for c, refused in zip(comparison.costs, comparison.false_positives, strict=True))
    verdict = ("a policy let a case escape or affect the host" if comparison.failed
               else "no policy let a case escape or affect the host")
    return f"""<h2>Comparison</h2>
<p>{len(comparison.labels)} policies over {len(comparison.cases)} cases:
<b>{comparison.differing}</b> cases end differently;
<b class="{'bad' if comparison.failed else 'good'}">{verdict}</b>.</p>
<h3>Cost and verdict per policy</h3>
<table><tr><th>policy</th><th>tier</th><th>wall s</th><th>run ms</th><th>fuel</th>
<th>max mem MiB</th><th>sub-calls</th><th>benign programs refused</th><th>escaped</th>
<th>host-affected</th></tr>
{cost_rows}
</table>
<h3>Per category</h3>
<table><tr><th>category</th>{heads}</tr>
{category_rows}
</table>
<h3>Per case (cases that differ first)</h3>
<table class=cases><tr><th>case</th><th>category</th>{heads}</tr>
{case_rows}
</table>
"""

