"""Help text of the `codemode` commands: flags shown without a `<bool>` type."""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand, TyperGroup


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
