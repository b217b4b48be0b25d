"""The version of the installed distribution, for `--version`, MCP and telemetry."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def codemode_version() -> str:
    """The installed distribution's version ("0" when run from sources not installed)."""
    try:
        return version("codemode")
    except PackageNotFoundError:
        return "0"
