"""`codemode eval CORPUS... --policy P [--policy Q ...] [--tools MODULE:ATTR ...] [--tier T]
[--jobs N] [--variants N] [--seed S] [--ray ADDRESS] [--json] [--html FILE]`: load, run each
policy with a progress display, report (one policy) or compare (several), and decide the
exit status.

With `--tools`, the cases run against the user's own tools instead of the reference toolset
(docs/security.md "Your own tools"): loaded here first, so that a bad spec or a policy
that names tools they lack is a usage error before any case runs; each worker imports them
again from this working directory."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .._policy.policy import Policy, PolicyError
from ._compare import Comparison, comparison_html, print_comparison
from ._corpus import Case, CorpusError, load_corpus
from ._messages import ToolSource
from ._report import EvalReport, page, print_report, report_section, to_html, to_json
from ._runner import evaluate
from ._slot import CaseResult

EXIT_OK = 0
EXIT_FAILED = 1        # a case escaped or affected the host (under any of the policies)
EXIT_USAGE = 2         # bad policy, corpus or arguments
PROGRESS_EVERY_S = 5.0  # a progress line this often when stderr is not a terminal


class EvalUsageError(Exception):
    """The evaluation could not start: a bad policy, corpus path or tier."""


def load_policy(policy_path: Path, tier: str | None) -> Policy:
    """The policy file, with `tier` replacing its tier when given.

    Raises:
        EvalUsageError: the policy is invalid or its tier cannot be built.
    """
    try:
        policy = Policy.load(policy_path)
        if tier is not None:
            policy = Policy.from_data({**msgspec.to_builtins(policy), "tier": tier},
                                      path=policy_path)
        policy.build_sandbox()
    except PolicyError as exc:
        raise EvalUsageError(str(exc)) from None
    return policy


def tool_source(specs: Sequence[str], policy: Policy) -> ToolSource:
    """The user's tools `specs` names, checked against `policy`: what the workers load.

    Raises:
        EvalUsageError: a spec names no tools (`load_tools`), `expose` matches none of
            them, or a rule or `[[labels]]` entry names an exact tool they lack.
    Warns:
        PolicyWarning: a rule's glob matches none of them.
    """
    import os
    import warnings

    from codemode.pipeline import Session

    from .._mcp.toolsets import ToolsSpecError, load_tools
    from .._policy.policy import PolicyWarning

    path = os.getcwd()
    try:
        session = Session(tools=load_tools(specs, path=path))
    except ToolsSpecError as exc:
        raise EvalUsageError(f"--tools: {exc}") from None
    names = [d.name for d in session.visible_tools()]
    exposed = policy.exposed_names(session)
    try:
        if policy.expose and names and not exposed:
            raise PolicyError(f"{list(policy.expose)} matches none of the tools "
                              f"({', '.join(names)})", key="expose")
        for warning in policy.check_rules(names):
            warnings.warn(warning, PolicyWarning, stacklevel=2)
    except PolicyError as exc:
        raise EvalUsageError(str(exc)) from None
    finally:
        session.close()
    return ToolSource(specs=tuple(specs), path=path, exposed=tuple(exposed))


def prepare(corpus: Sequence[Path], policy_path: Path,
            tier: str | None) -> tuple[list[Case], Policy]:
    """Load the corpus and the policy (with `tier` replacing the policy's, when given).

    Raises:
        EvalUsageError: the policy or a corpus path is invalid, or the corpus is empty.
    """
    policy = load_policy(policy_path, tier)
    try:
        cases = load_corpus(corpus)
    except CorpusError as exc:
        raise EvalUsageError(str(exc)) from None
    if not cases:
        raise EvalUsageError("the corpus has no cases (*.py files)")
    return cases, policy


class _ProgressLines:
    """A line on stderr every `PROGRESS_EVERY_S` while cases run, for a stderr that is not
    a terminal (a CI log, a pipe), where the live bar is not shown."""

    def __init__(self, console: Console, label: str, total: int) -> None:
        self.console = console
        self.label = label
        self.total = total
        self.done = 0
        self.counts: Counter[str] = Counter()
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="eval-progress", daemon=True)

    def __enter__(self) -> _ProgressLines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def advance(self, result: CaseResult) -> None:
        with self._lock:
            self.done += 1
            self.counts[result.outcome] += 1

    def line(self) -> str:
        with self._lock:
            counts = ", ".join(f"{n} {o}" for o, n in sorted(self.counts.items()))
            return (f"eval {self.label}: {self.done}/{self.total} cases, "
                    f"{time.monotonic() - self.started:.0f} s" + (f" ({counts})" if counts else ""))

    def _loop(self) -> None:
        while not self._stop.wait(PROGRESS_EVERY_S):
            self.console.print(escape(self.line()), highlight=False, soft_wrap=True)


def _run_one(cases: Sequence[Case], policy: Policy, policy_path: Path, *, jobs: int,
             err_console: Console, ray_address: str | None, label: str,
             tools: ToolSource | None = None) -> EvalReport:
    started = time.monotonic()
    progress = Progress(TextColumn(f"[bold]eval {escape(label)}[/]"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("{task.description}"), console=err_console, transient=True,
                        disable=not err_console.is_terminal)
    lines = _ProgressLines(err_console, label, len(cases))
    with progress:
        task = progress.add_task("", total=len(cases))

        def advance(result: CaseResult) -> None:
            lines.advance(result)
            progress.update(task, advance=1, description=f"{result.id}: {result.outcome}")

        if err_console.is_terminal:
            results = evaluate(cases, policy, jobs=jobs, on_result=advance,
                               ray_address=ray_address, tools=tools)
        else:
            with lines:
                results = evaluate(cases, policy, jobs=jobs, on_result=advance,
                                   ray_address=ray_address, tools=tools)
    return EvalReport.build(policy=str(policy_path), tier=policy.tier, jobs=jobs,
                            duration_s=time.monotonic() - started, results=results)


def run_command(corpus: Sequence[Path], policy_paths: Path | Sequence[Path], *,
                tier: str | None, jobs: int, as_json: bool, html_path: Path | None,
                console: Console, err_console: Console, ray_address: str | None = None,
                variants: int = 0, seed: int = 0,
                escapes_dir: Path | None = None, tools: Sequence[str] = ()) -> int:
    """Run the evaluation under each policy and print it; return the exit status
    (`EXIT_*`).

    Args:
        policy_paths: one policy file (a report) or several (one run each, then a
            comparison; `--json` prints `{"reports": [...], "comparison": {...}}`).
        variants: generated variants per case to add (`_variants.generate`, `seed`).
        escapes_dir: where a variant that escaped is written as a standalone case
            (default: `eval-escapes/` in the working directory; only created if needed).
        tools: `MODULE:ATTR` specs of the user's tools to run the cases against instead of
            the reference toolset (`tool_source`).
    """
    paths = [policy_paths] if isinstance(policy_paths, Path) else list(policy_paths)
    try:
        if not paths:
            raise EvalUsageError("give at least one --policy")
        policies = [load_policy(path, tier) for path in paths]
        # a --tools module that prints as it is imported does not write into the report
        with contextlib.redirect_stdout(sys.stderr):
            sources = [tool_source(tools, policy) if tools else None for policy in policies]
        cases, _ = prepare(corpus, paths[0], tier)
        if variants:
            from ._variants import generate
            cases = [*cases, *generate(cases, per_case=variants, seed=seed)]
    except EvalUsageError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_USAGE
    if ray_address is not None and importlib.util.find_spec("ray") is None:
        err_console.print("[red]error:[/red] --ray needs Ray: "
                          + escape("pip install 'codemode[ray]'"))
        return EXIT_USAGE
    reports = [_run_one(cases, policy, path, jobs=jobs, err_console=err_console,
                        ray_address=ray_address, label=path.stem, tools=source)
               for policy, path, source in zip(policies, paths, sources, strict=True)]
    if variants:
        from ._variants import write_escapes
        for report in reports:
            for written in write_escapes(cases, report.results,
                                         escapes_dir or Path("eval-escapes")):
                err_console.print(f"escaped variant written to {escape(str(written))}")
    if len(reports) == 1:
        return _single(reports[0], as_json=as_json, html_path=html_path, console=console)
    return _compared(reports, as_json=as_json, html_path=html_path, console=console)


def _single(report: EvalReport, *, as_json: bool, html_path: Path | None,
            console: Console) -> int:
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


def _compared(reports: Sequence[EvalReport], *, as_json: bool, html_path: Path | None,
              console: Console) -> int:
    comparison = Comparison.build(reports)
    if as_json:
        data = {"reports": [msgspec.json.decode(to_json(r)) for r in reports],
                "comparison": msgspec.to_builtins(comparison)}
        sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(data), indent=2)
                                + b"\n")
        sys.stdout.flush()
    else:
        print_comparison(comparison, console)
    if html_path is not None:
        body = comparison_html(comparison) + "".join(
            report_section(r, heading=f"{label}: {r.policy} ({r.tier})")
            for label, r in zip(comparison.labels, reports, strict=True))
        html_path.write_text(page("codemode eval: " + " vs ".join(comparison.labels), body),
                             encoding="utf-8")
        if not as_json:
            console.print(f"[dim]HTML report: {html_path}[/dim]")
    return EXIT_FAILED if comparison.failed else EXIT_OK
