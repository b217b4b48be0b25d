"""`codemode cache list` and `codemode cache prune`: the sandbox component's cache.

Every version of the guest's sources builds its own component (~34 MB) and compiled copies
(~50 MB per wasmtime version and engine configuration) in `$CODEMODE_CACHE_DIR` (default
`~/.cache/codemode`), and nothing removes them: after an upgrade, or with several
checkouts, the older ones stay until `prune` removes them.
"""

from __future__ import annotations

import time

import typer

from ._help import _Command, _Group

cache_app = typer.Typer(cls=_Group, no_args_is_help=True,
                        help="Inspect and prune the sandbox component's cache.")


def _mib(size_bytes: int) -> str:
    return f"{size_bytes / (1 << 20):.1f} MiB"


@cache_app.command("list", cls=_Command,
                   short_help="List the cached components, newest first.")
def list_command() -> None:
    """List the cached components, newest first: one line per version of the sandbox's
    sources (its key, size, last write, and `current` for the one this installation runs)
    on stdout; the directory and the total on stderr."""
    from codemode.sandbox._cache import cache_dir, cached_keys

    try:
        keys = cached_keys()
    except OSError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for key in keys:
        written = time.strftime("%Y-%m-%d %H:%M", time.localtime(key.modified))
        typer.echo(f"{key.key}  {_mib(key.size_bytes):>11}  {written}"
                   f"{'  current' if key.current else ''}")
    total = sum(k.size_bytes for k in keys)
    typer.echo(f"{cache_dir()}: {len(keys)} component(s), {_mib(total)}", err=True)


@cache_app.command("prune", cls=_Command,
                   short_help="Remove the components of other versions of the sources.")
def prune_command(
    everything: bool = typer.Option(False, "--all",
                                    help="Remove the current component too (the next run "
                                         "builds it again, 15-40 s)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be removed; "
                                                          "remove nothing."),
) -> None:
    """Remove the cached components of every version of the sandbox's sources but the one
    this installation runs (waits for a build in progress). Prints each removed version's
    key and size on stdout, and the total on stderr; exits 1 with one line on stderr if
    the directory cannot be read or a file removed."""
    from codemode.sandbox._cache import cache_dir, prune

    try:
        pruned = prune(everything=everything, dry_run=dry_run)
    except OSError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for key in pruned.removed:
        typer.echo(f"{key.key}  {_mib(key.size_bytes):>11}")
    verb = "would remove" if dry_run else "removed"
    typer.echo(f"{cache_dir()}: {verb} {len(pruned.removed)} component(s), {pruned.files} "
               f"file(s), {_mib(pruned.size_bytes)}", err=True)
