"""`codemode eval`'s options (the command itself is `codemode._eval.run_command`)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ._console import console_for, err_console

EVAL_HELP = (
    "Run every program of a corpus under a policy and report, per case and category, what "
    "happened (blocked, limit, escaped, host-affected, ran-ok, wrong-output). With several "
    "--policy options, run the corpus under each and compare them. The cases call the "
    "reference toolset, or your own tools with --tools (their bodies run: point them at "
    "test data).\n\n"
    "Exits 1 when a case escaped or affected the host under any policy; 128 + signum when "
    "SIGTERM, SIGHUP or Ctrl-C stopped it (its workers stopped too).")
EVAL_SHORT_HELP = "Run a corpus of programs under a policy and report what each did."


def eval_command(
    corpus: list[Path] = typer.Argument(
        ..., metavar="CORPUS",
        help="Corpus files or directories; every *.py under a directory is a case."),
    policy: list[Path] = typer.Option(
        ..., "--policy", metavar="FILE",
        help="Run the cases under this policy file (TOML); repeat it to compare policies."),
    tools: list[str] = typer.Option(
        [], "--tools", metavar="MODULE:ATTR",
        help="Run the cases against your own tools instead of the reference toolset: ATTR "
             "of MODULE (imported from the working directory) is a @codemode.tool, a list "
             "of them, or a function of no arguments returning them; repeatable."),
    tier: str | None = typer.Option(
        None, "--tier", metavar="TIER",
        help="Run in this tier instead of the policy's: wasm, restricted or "
             "restricted-in-process."),
    jobs: int = typer.Option(1, "--jobs", min=1, metavar="N",
                             help="Run this many cases at once, in worker processes."),
    ray: str | None = typer.Option(
        None, "--ray", metavar="ADDRESS",
        help="Run the cases on a Ray cluster instead, as --jobs actors (needs the ray "
             "extra). ADDRESS: local (start one here), auto (join the one ray start runs "
             "here) or ray://HOST:PORT."),
    variants: int = typer.Option(
        0, "--variants", min=0, metavar="N",
        help="Also run up to N generated variants of each case (technique-preserving "
             "rewrites); an escaped variant is written to eval-escapes/."),
    seed: int = typer.Option(0, "--seed", metavar="S",
                             help="Seed of the variant generator (same seed, same variants)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    html: Path | None = typer.Option(None, "--html", metavar="FILE",
                                        help="Also write a self-contained HTML report."),
) -> None:
    """`codemode eval` (its help is `EVAL_HELP`). A stop signal raises `KeyboardInterrupt`
    where it waits; every worker is stopped before it reaches `_Group` (exit 128 + signum)."""
    from .._eval import run_command

    status = run_command(corpus, policy, tier=tier, jobs=jobs, as_json=as_json,
                         html_path=html, console=console_for(sys.stdout),
                         err_console=err_console(), ray_address=ray, variants=variants,
                         seed=seed, tools=tools)
    raise typer.Exit(status)
