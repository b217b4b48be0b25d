"""The classes of the `codemode` commands: flags shown without a `<bool>` type in help, and
a command stopped by a signal (Ctrl-C, SIGTERM, SIGHUP: `_stop.py`) exiting with
`128 + signum` after one line on stderr."""

from __future__ import annotations

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


class _Command(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_flags(super().get_params(ctx))


class _Group(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_flags(super().get_params(ctx))

    def invoke(self, ctx: Any) -> Any:
        """The command; stopped by a signal (`KeyboardInterrupt` once it has unwound): one
        line on stderr and exit `128 + signum` (typer would exit 130 whatever the signal)."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise typer.Exit(report_stop()) from None
