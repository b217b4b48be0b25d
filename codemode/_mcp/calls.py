"""What the pipeline has seen of the calls in flight, for integrations that get only a call
id later (an approval request carries no arguments; a result observer wants a duration).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codemode.pipeline import CallResult, Execution, Session

__all__ = ["CallIndex", "SeenCall"]


@dataclass(frozen=True)
class SeenCall:
    """One call as `tools/pre-execute` saw it.

    Attributes:
        name: the tool name as requested.
        arguments: the frozen arguments (lossless JSON; `thaw` for plain values).
        root_call_id: the top-level call it belongs to (its own id for a top-level call).
        started_s: `time.monotonic()` when pre-execute reached it.
    """

    name: str
    arguments: Any
    root_call_id: str
    started_s: float


class CallIndex:
    """Records every call that reaches `tools/pre-execute`, until its top-level call's
    result is published (so a run's sub-calls stay known while the run lasts).

    Register it before any listener that may decide without delegating (policies): a
    listener registered earlier can deny a call before the index sees it.
    """

    def __init__(self, session: Session) -> None:
        self._seen: dict[str, SeenCall] = {}
        self._by_root: dict[str, list[str]] = {}
        self._disposers: list[Callable[[], None]] = [
            session.on("tools/pre-execute", self._record),
            session.on("tools/result", self._forget),
        ]

    def get(self, call_id: str) -> SeenCall | None:
        """The call with this id (a sub-call id or a top-level one), if still in flight."""
        return self._seen.get(call_id)

    def close(self) -> None:
        """Stop recording (idempotent)."""
        for dispose in self._disposers:
            dispose()
        self._seen.clear()
        self._by_root.clear()

    async def _record(self, execution: Execution, next: Callable[[], Any]) -> Any:
        self._seen[execution.call_id] = SeenCall(execution.name, execution.arguments,
                                                 execution.root_call_id, time.monotonic())
        self._by_root.setdefault(execution.root_call_id, []).append(execution.call_id)
        return await next()

    def _forget(self, execution: Execution, result: CallResult) -> None:
        if execution.parent is None:
            for call_id in self._by_root.pop(execution.call_id, ()):
                self._seen.pop(call_id, None)
            self._seen.pop(execution.call_id, None)
