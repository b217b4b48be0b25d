"""`codemode eval --ray ADDRESS`: the cases of a corpus spread over a Ray cluster.

One actor per job slot (`--jobs N`, one CPU each) holds a `_slot.Slot`, the very object
the process-pool path drives: its worker process, canary tree and listener live on the
actor's node, and each case is one call of `Slot.run_case`, so a case is classified
exactly as it is locally. The driver hands each idle actor the next case and reports
results as they arrive, in case order at the end.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import ray

from .._policy.policy import Policy
from ..ray import connect
from ._corpus import Case
from ._messages import ToolSource
from ._native import ReferenceRun
from ._slot import CaseResult, Slot, _reference


class _SlotActor:
    """A job slot in a Ray actor; its canary tree is in a temporary directory there."""

    def __init__(self, policy: Policy, mem_slack_bytes: int,
                 tools: ToolSource | None = None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="codemode-eval-")
        self._slot = Slot(Path(self._tmp.name) / "slot", policy, mem_slack_bytes, tools)
        self._tools = tools
        self._references: dict[str, ReferenceRun | None] = {}
        self._lock = threading.Lock()

    def run_case(self, index: int, case: Case) -> tuple[int, CaseResult]:
        reference = (_reference(case, self._references, self._lock, self._tools, self._slot)
                     if case.benign else None)
        return index, self._slot.run_case(case, reference)

    def close(self) -> None:
        self._slot.close()
        self._tmp.cleanup()


def evaluate_on_ray(cases: Sequence[Case], policy: Policy, *, address: str, jobs: int,
                    on_result: Callable[[CaseResult], None] | None,
                    mem_slack_bytes: int,
                    tools: ToolSource | None = None) -> list[CaseResult]:
    """`_runner.evaluate` on a Ray cluster (`codemode.ray.connect(address)`): `jobs` actors,
    results in case order; `tools`' modules must import on every node from `tools.path`.
    An actor that dies raises `ray.exceptions.RayActorError`."""
    connect(address)
    actor_class = ray.remote(num_cpus=1)(_SlotActor)
    actors = [actor_class.remote(policy, mem_slack_bytes, tools)
              for _ in range(min(jobs, max(len(cases), 1)))]
    results: list[CaseResult | None] = [None] * len(cases)
    pending = list(range(len(cases)))[::-1]
    running = {}
    try:
        for actor in actors:
            if pending:
                index = pending.pop()
                running[actor.run_case.remote(index, cases[index])] = actor
        while running:
            [done], _ = ray.wait(list(running), num_returns=1)
            actor = running.pop(done)
            index, result = ray.get(done)
            results[index] = result
            if on_result is not None:
                on_result(result)
            if pending:
                index = pending.pop()
                running[actor.run_case.remote(index, cases[index])] = actor
    finally:
        for actor in actors:
            try:
                ray.get(actor.close.remote())
            except ray.exceptions.RayError:       # a dead actor: nothing left to close
                pass
            ray.kill(actor)
    return [r for r in results if r is not None]
