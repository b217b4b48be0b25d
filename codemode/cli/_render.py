"""What `codemode run` writes: the program's own output, and the card drawn on stderr.

The program's stdout and stderr are written as they are, except to a terminal, where
control and invisible characters are made visible (`safe_text`), so a program cannot
drive the user's terminal. The card (the final value or the error, the sub-call table and
a summary line) is rich output with the same protection, cut to a screenful; on a terminal
a long cell is cut to `_CELL_CHARS`, piped or redirected it is whole (`_console.py`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TextIO

from .._run.visible import visible
from ._report import RunReport, SubcallReport

if TYPE_CHECKING:   # rich loads when a card is drawn: a piped `codemode run` draws none
    from rich.console import Console

    from codemode.pipeline import Session

_SHOWN_CHARS = 20_000
_SHOWN_LINES = 400
_CELL_CHARS = 80


def safe_text(text: str) -> str:
    """`text` with control, invisible and bidirectional characters written as escapes
    (`\\x1b`, `\\u202e`; `codemode._run.visible`), newlines and tabs kept."""
    return visible(text)


def write_output(stream: TextIO, text: str) -> None:
    """Write what the program printed to `stream`: as UTF-8, unchanged, unless `stream` is
    a terminal (then through `safe_text`)."""
    if not text:
        return
    if stream.isatty():
        text = safe_text(text)
    stream.flush()
    stream.buffer.write(text.encode("utf-8", "backslashreplace"))
    stream.buffer.flush()


def _shown(text: str) -> str:
    """Rich markup for `text`, safe and small enough for the terminal: cut after
    `_SHOWN_CHARS` characters or `_SHOWN_LINES` lines (the log and --json keep all)."""
    from rich.markup import escape

    if len(text) > _SHOWN_CHARS:
        text = text[:_SHOWN_CHARS] + f"\n[... {len(text) - _SHOWN_CHARS} more characters]"
    lines = text.split("\n")
    if len(lines) > _SHOWN_LINES:
        text = "\n".join(lines[:_SHOWN_LINES]) + \
            f"\n[... {len(lines) - _SHOWN_LINES} more lines]"
    return escape(safe_text(text))


def failure_text(report: RunReport) -> str:
    """`code run failed (<code>): <message>`, then the program's traceback if any."""
    assert report.error is not None
    text = f"code run failed ({report.code}): {report.error.message}"
    if report.error.traceback:
        text += "\n" + report.error.traceback.rstrip("\n")
    return text


def _arguments_text(arguments: Any, *, whole: bool = False) -> str:
    """`k=<JSON>, ...` on one line, cut to a table cell unless `whole`."""
    if isinstance(arguments, dict):
        text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    else:
        text = json.dumps(arguments, ensure_ascii=False)
    text = " ".join(text.split())
    return text if whole else _cut(text)


def pending_text(report: RunReport, resume: str | None) -> str:
    """What a paused run waits on, for people (stderr), and how to go on::

        codemode: paused: waiting for approval of 2 tool calls (run call_1)
          call_1:2  step_b(note="b")  reason: policy requires approval for tool "step_b"
          call_1:3  step_c(note="c")
        To go on, give a decision for each request (--approve ID, --deny ID[:REASON]):
          codemode resume session.db call_1 --approve call_1:2 --deny call_1:3

    Args:
        report: a report of kind "pending".
        resume: the command that resumes the run (the first request approved, the others
            denied, as an example), or None when the run cannot be resumed (no log).
    Returns:
        The text, ending with a newline; control characters are left to `write_output`.
    """
    count = len(report.approvals)
    lines = [f"codemode: paused: waiting for approval of {count} tool call"
             f"{'s' if count != 1 else ''} (run {report.run_id})"]
    for request in report.approvals:    # whole: the person approves every argument
        line = f"  {request.id}  {request.tool}({_arguments_text(request.arguments, whole=True)})"
        if request.reason:
            line += f"  reason: {request.reason}"
        lines.append(line)
    if resume is None:
        lines.append("The run cannot be resumed: its session log was in memory. Run it again "
                     "with --log FILE to be able to resume it.")
    else:
        lines.append("To go on, give a decision for each request (--approve ID, "
                     "--deny ID[:REASON]), e.g.:")
        lines.append(f"  {resume}")
    return "\n".join(lines) + "\n"


def _value_text(report: RunReport) -> str:
    if report.value is None:
        return "(no final value)"
    if isinstance(report.value, str):
        return report.value
    return json.dumps(report.value, indent=2, ensure_ascii=False)


def _card_text(payload: Any) -> str | None:
    """Text of a presenter's card payload: a string, or a mapping's title/summary."""
    if isinstance(payload, str):
        return payload
    if isinstance(payload, dict):
        parts = [str(payload[k]) for k in ("title", "summary", "text") if payload.get(k)]
        return " — ".join(parts) or None
    return None


def _cut(text: str) -> str:
    return text[:_CELL_CHARS] + ("…" if len(text) > _CELL_CHARS else "")


def _row(session: Session, row: SubcallReport,
         whole: bool = False) -> tuple[str, str, str, str, str]:
    """One table row, through the tool's presenters when it has them (docs/pipeline-spec.md
    §11.8); long cells cut unless `whole`."""
    cut = (lambda text: text) if whole else _cut
    shown = _card_text(session.present_call(row.tool, row.arguments))
    arguments = shown or json.dumps(row.arguments, ensure_ascii=False)
    projection = {"content": [{"type": "text", "text": row.text}], "isError": not row.ok,
                  "meta": None}
    outcome = _card_text(session.present_result(row.tool, row.arguments, projection))
    if outcome is None:
        outcome = " ".join(row.text.split())
    if not row.ok:
        outcome = f"{row.code}: {outcome}"
    outcome = _shown(cut(outcome))
    if row.replayed_from is not None:
        outcome += f" [dim](replayed from {_shown(row.replayed_from)})[/dim]"
    ms = "" if row.duration_ms is None else f"{row.duration_ms:.0f}"
    return (str(row.n), _shown(row.tool), _shown(cut(arguments)),
            f"[red]{outcome}[/red]" if not row.ok else outcome, ms)


def draw_card(console: Console, report: RunReport, title: str, session: Session) -> None:
    """The run's card: the final value (or why the run failed) under the title, the table
    of sub-calls, and `N sub-call(s), M failed`."""
    from rich.panel import Panel
    from rich.table import Table

    if report.kind == "pending":
        count = len(report.approvals)
        body = (f"paused: waiting for approval of {count} tool call"
                f"{'s' if count != 1 else ''} (run {report.run_id})")
    else:
        body = _value_text(report) if report.ok else failure_text(report)
    border = "green" if report.ok else "yellow" if report.kind == "pending" else "red"
    console.print(Panel(_shown(body), title=f"run_code: {_shown(title)}",
                        border_style=border, title_align="left", expand=console.is_terminal))
    if report.subcalls:
        table = Table(title="sub-calls", title_justify="left", show_lines=False)
        table.add_column("#", justify="right")
        table.add_column("tool")
        table.add_column("arguments", overflow="fold")
        table.add_column("outcome", overflow="fold")
        table.add_column("ms", justify="right")
        for row in report.subcalls:
            table.add_row(*_row(session, row, whole=not console.is_terminal))
        console.print(table)
    failed = sum(1 for row in report.subcalls if not row.ok and row.code != "APPROVAL_PENDING")
    waiting = sum(1 for row in report.subcalls if row.code == "APPROVAL_PENDING")
    replayed = sum(1 for row in report.subcalls if row.replayed_from is not None)
    summary = f"{len(report.subcalls)} sub-call(s), {failed} failed"
    if waiting:
        summary += f", {waiting} waiting for approval"
    if replayed:
        summary += f", {replayed} replayed from the log"
    console.print(f"[dim]{summary}[/dim]")
