"""`codemode eval CORPUS... --policy P [--tier T] [--jobs N] [--ray ADDRESS] [--json]
[--html FILE]`: load, run with a progress bar, report, and decide the exit status."""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .._policy import Policy, PolicyError
from ._corpus import Case, CorpusError, load_corpus
from ._report import EvalReport, print_report, to_html, to_json
from ._runner import CaseResult, evaluate

EXIT_OK = 0
EXIT_FAILED = 1        # a case escaped or affected the host
EXIT_USAGE = 2         # bad policy, corpus or arguments


class EvalUsageError(Exception):
    """The evaluation could not start: a bad policy, corpus path or tier."""


def prepare(corpus: Sequence[Path], policy_path: Path,
            tier: str | None) -> tuple[list[Case], Policy]:
    """Load the corpus and the policy (with `tier` replacing the policy's, when given).

    Raises:
        EvalUsageError: the policy or a corpus path is invalid, or the corpus is empty.
    """
    try:
        policy = Policy.load(policy_path)
        if tier is not None:
            policy = Policy.from_data({**msgspec.to_builtins(policy), "tier": tier},
                                      path=policy_path)
        policy.build_sandbox()
        cases = load_corpus(corpus)
    except (PolicyError, CorpusError) as exc:
        raise EvalUsageError(str(exc)) from None
    if not cases:
        raise EvalUsageError("the corpus has no cases (*.py files)")
    return cases, policy


def run_command(corpus: Sequence[Path], policy_path: Path, *, tier: str | None, jobs: int,
                as_json: bool, html_path: Path | None, console: Console,
                err_console: Console, ray_address: str | None = None) -> int:
    """Run the evaluation and print it; return the exit status (see `EXIT_*`)."""
    try:
        cases, policy = prepare(corpus, policy_path, tier)
    except EvalUsageError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_USAGE
    if ray_address is not None and importlib.util.find_spec("ray") is None:
        err_console.print("[red]error:[/red] --ray needs Ray: "
                          + escape("pip install 'codemode[ray]'"))
        return EXIT_USAGE
    started = time.monotonic()
    progress = Progress(TextColumn("[bold]eval[/]"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("{task.description}"),
                        console=err_console, transient=True, disable=not err_console.is_terminal)

    with progress:
        task = progress.add_task("", total=len(cases))

        def advance(result: CaseResult) -> None:
            progress.update(task, advance=1, description=f"{result.id}: {result.outcome}")

        results = evaluate(cases, policy, jobs=jobs, on_result=advance,
                           ray_address=ray_address)
    report = EvalReport.build(policy=str(policy_path), tier=policy.tier, jobs=jobs,
                              duration_s=time.monotonic() - started, results=results)
    if as_json:
        sys.stdout.buffer.write(to_json(report) + b"\n")
        sys.stdout.flush()
    else:
        print_report(report, console)
    if html_path is not None:
        html_path.write_text(to_html(report), encoding="utf-8")
        if not as_json:
            console.print(f"[dim]HTML report: {html_path}[/dim]")
    return EXIT_FAILED if report.failed else EXIT_OK
