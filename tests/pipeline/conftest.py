"""Shared fixtures for the pipeline tests."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from codemode.pipeline import ExecutionInput, Signal, ToolDefinition  # noqa: E402


@pytest.fixture(params=["session.db", "session.jsonl"], ids=["sqlite", "jsonl"])
def log_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """Both persistent backends: SQLite and JSONL."""
    return tmp_path / request.param


def make_tool(
    name: str = "echo",
    execute: Any = None,
    **kwargs: Any,
) -> ToolDefinition:
    """A raw definition; the default body returns its arguments."""

    async def default(args: Any, ctx: Any) -> Any:
        return args

    return ToolDefinition(
        name=name,
        description=kwargs.pop("description", f"{name} tool"),
        parameters=kwargs.pop("parameters", {"type": "object"}),
        execute=execute or default,
        **kwargs,
    )


def inp(
    name: str = "echo", arguments: Any = None, *, signal: Signal | None = None, **kw: Any
) -> ExecutionInput:
    return ExecutionInput(
        call_id=kw.pop("call_id", "c1"),
        name=name,
        arguments={} if arguments is None else arguments,
        signal=signal or Signal(),
        **kw,
    )


class Published:
    """A ``tools/result`` observer recording (execution, result) pairs."""

    def __init__(self, session: Any) -> None:
        self.items: list[tuple[Any, Any]] = []
        session.on("tools/result", self)

    def __call__(self, execution: Any, result: Any) -> None:
        self.items.append((execution, result))

    @property
    def results(self) -> list[Any]:
        return [r for _, r in self.items]


def error_text(message: str) -> tuple[dict[str, str], ...]:
    return ({"type": "text", "text": f"Error: {message}"},)


class Turns:
    """Counts the event loop's turns: a callback that schedules itself again each turn."""

    def __init__(self) -> None:
        self.count = 0
        self._handle = asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self.count += 1
        self._handle = asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        self._handle.cancel()
