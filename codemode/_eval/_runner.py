"""Running a corpus under a policy (docs/design.md §7): `evaluate` spreads the cases over
job slots (`_slot.Slot`), one thread per slot driving its worker process, or over the actors
of a Ray cluster (`_ray`), and returns the results in case order.
"""

from __future__ import annotations

import queue
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from .._policy.policy import Policy
from ._corpus import Case
from ._messages import ToolSource
from ._native import ReferenceRun
from ._slot import MEM_SLACK_BYTES, CaseResult, Slot, _reference


def evaluate(cases: Sequence[Case], policy: Policy, *, jobs: int = 1,
             on_result: Callable[[CaseResult], None] | None = None,
             mem_slack_bytes: int = MEM_SLACK_BYTES,
             workdir: Path | None = None, ray_address: str | None = None,
             tools: ToolSource | None = None) -> list[CaseResult]:
    """Run every case under `policy` in `jobs` worker processes; results in case order.

    Args:
        cases: the corpus.
        policy: tier, limits, exposed tools and rules of every run.
        jobs: worker processes running cases at the same time (>= 1).
        on_result: called (from a slot's thread, serialized) as each case finishes.
        mem_slack_bytes: see `Slot`.
        workdir: where the canary trees go (default: a fresh temporary directory).
        ray_address: run the slots as actors of this Ray cluster instead (`_ray.py`; the
            `ray` extra); `workdir` is then each node's temporary directory.
        tools: the user's tools to run the cases against (None: the reference toolset).
    """
    if jobs < 1:
        raise ValueError("jobs must be >= 1")
    if ray_address is not None:
        from ._ray import evaluate_on_ray
        return evaluate_on_ray(cases, policy, address=ray_address, jobs=jobs,
                               on_result=on_result, mem_slack_bytes=mem_slack_bytes,
                               tools=tools)
    results: list[CaseResult | None] = [None] * len(cases)
    pending: queue.Queue[int] = queue.Queue()
    for index in range(len(cases)):
        pending.put(index)
    lock = threading.Lock()
    references: dict[str, ReferenceRun | None] = {}
    errors: list[BaseException] = []

    slots: list[Slot] = []
    finished = threading.Semaphore(0)        # released once by each slot's thread as it ends

    with tempfile.TemporaryDirectory(prefix="codemode-eval-", dir=workdir) as tmp:
        def drive(slot_index: int) -> None:
            slot = Slot(Path(tmp) / f"slot{slot_index}", policy, mem_slack_bytes, tools)
            with lock:
                slots.append(slot)
            try:
                while True:
                    try:
                        index = pending.get_nowait()
                    except queue.Empty:
                        return
                    case = cases[index]
                    reference = None
                    if case.benign:
                        reference = _reference(case, references, lock, tools, slot)
                    result = slot.run_case(case, reference)
                    with lock:
                        results[index] = result
                        if on_result is not None:
                            on_result(result)
            except BaseException as exc:   # surfaced after the other slots finish
                errors.append(exc)
            finally:
                slot.close()
                finished.release()

        threads = [threading.Thread(target=drive, args=(i,), name=f"eval-slot-{i}")
                   for i in range(min(jobs, max(len(cases), 1)))]
        # Waited for on `finished`, not with `Thread.join`: a join that a signal's
        # KeyboardInterrupt interrupts marks the thread finished in Python 3.11, and the
        # process would then exit with the thread, and its worker, still running.
        waited = 0
        try:
            for thread in threads:
                thread.start()
            while waited < len(threads):
                finished.acquire()
                waited += 1
        except BaseException:       # Ctrl-C, SIGTERM (codemode/cli/_stop.py): stop every slot
            while not pending.empty():
                pending.get_nowait()
            with lock:
                for slot in slots:
                    slot.close()    # kills its worker: the case it runs ends at once
            started = sum(1 for thread in threads if thread.ident is not None)
            while waited < started:
                finished.acquire()  # a slot made after the close closes itself at once
                waited += 1
            raise
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    return [r for r in results if r is not None]


