"""The classes of the `codemode` commands: flags shown without a `<bool>` type in help, an
unknown option's suggestions only when they are close, and a command stopped by a signal
(Ctrl-C, SIGTERM, SIGHUP: `_stop.py`) exiting with `128 + signum` after one line on
stderr."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from ._stop import report_stop


def _plain_flags(params: list[Any]) -> list[Any]:
    """No `<bool>` type beside flags in help (`--json`, `--builtin`, `--help`): a flag takes
    no value."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


def _close_suggestions(parse: Callable[[], list[str]]) -> list[str]:
    """`parse()`, where an unknown option suggests only options whose names, without their
    dashes, are close to it (difflib's ratio 0.6): with the dashes counted, `--bogus`
    would suggest `--log`."""
    try:
        from typer._click.exceptions import NoSuchOption  # typer that bundles click
    except ImportError:                               # pragma: no cover - older typer
        from click.exceptions import NoSuchOption  # type: ignore[assignment]
    from difflib import get_close_matches

    try:
        return parse()
    except NoSuchOption as exc:
        bare = {option.lstrip("-"): option for option in exc.possibilities or ()}
        close = get_close_matches(exc.option_name.lstrip("-"), list(bare))
        exc.possibilities = [bare[name] for name in close] or None
        raise


class _Command(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_flags(super().get_params(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return _close_suggestions(lambda: super(_Command, self).parse_args(ctx, args))


class _Group(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_flags(super().get_params(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return _close_suggestions(lambda: super(_Group, self).parse_args(ctx, args))

    def invoke(self, ctx: Any) -> Any:
        """The command; stopped by a signal (`KeyboardInterrupt` once it has unwound): one
        line on stderr and exit `128 + signum` (typer would exit 130 whatever the signal)."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise typer.Exit(report_stop()) from None
