"""A run's output beyond what the model reads: streamed to the caller as the program prints
it (`CodeMode(on_output=...)`), and, when the sandbox cut it to its limit, the whole kept for
the caller (`CodeMode.full_output`) while the value says what was cut (docs/codemode.md,
"Output as it is printed" and "Output over its limit").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from codemode.sandbox import FullOutput, OnOutput, RunOutcome

OnRunOutput = Callable[[str, str, str], None]
"""`on_output(call_id, stream, text)`: one piece of a `run_code` run's output as the program
wrote it. `call_id` is the `run_code` call's id; `stream` is "stdout" or "stderr"; the
pieces of one stream, joined, are the stream's whole text (`sandbox.OnOutput`). Called on
the session's event loop thread, in the order written, all of a run's pieces before its
call returns."""

FULL_OUTPUT_RUNS = 8
"""Runs whose cut output `CodeMode.full_output` still holds (per `CodeMode`): each may hold
up to three times `SandboxLimits.full_output_bytes`."""

_log = logging.getLogger("codemode.run_code")


def loop_output(callback: OnRunOutput | None, call_id: str,
                loop: asyncio.AbstractEventLoop) -> OnOutput | None:
    """The sandbox's `on_output` for one run: hands each piece to `callback` on `loop`'s
    thread (a callback that raises is logged on "codemode.run_code", the run goes on); None
    when there is no callback."""
    if callback is None:
        return None

    def deliver(stream: str, text: str) -> None:
        try:
            callback(call_id, stream, text)
        except Exception:
            _log.exception("the on_output callback failed on output of %s", call_id)

    def on_output(stream: str, text: str) -> None:
        try:
            loop.call_soon_threadsafe(deliver, stream, text)
        except RuntimeError:            # the loop is closed: nobody is listening
            pass

    return on_output


class FullOutputs:
    """The whole output of the latest `FULL_OUTPUT_RUNS` runs that were cut, by call id."""

    def __init__(self) -> None:
        self._runs: dict[str, FullOutput] = {}

    def remember(self, call_id: str, outcome: RunOutcome) -> None:
        if outcome.full is None:
            return
        self._runs[call_id] = outcome.full
        while len(self._runs) > FULL_OUTPUT_RUNS:
            self._runs.pop(next(iter(self._runs)))

    def get(self, call_id: str) -> FullOutput | None:
        return self._runs.get(call_id)


def cut_json(outcome: RunOutcome) -> list[dict[str, Any]]:
    """What the sandbox cut, for the run's value: `[{"part", "kept_bytes", "total_bytes"}]`
    ("stdout", "stderr" or "value"), empty when nothing was."""
    return [{"part": c.part, "kept_bytes": c.kept_bytes, "total_bytes": c.total_bytes}
            for c in outcome.cut]


def cut_line(cut: list[dict[str, Any]]) -> str:
    """The line the model reads about what was cut (`cut_json`'s items)."""
    parts = "; ".join(
        f"{c['part']} kept {c['kept_bytes']} of {c['total_bytes']} bytes"
        + (" of JSON" if c["part"] == "value" else "") for c in cut)
    return (f"[output cut to fit: {parts}. The program ran to its end and its tool calls "
            "stand; do not run it again to see the rest: print less or return a smaller "
            "value.]")
