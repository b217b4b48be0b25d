"""The threads wasm runs on: kept for reuse, each woken by a lock of its own.

Wasm runs on the calling thread's native stack, which must exceed the wasm stack limit
(wasmtime's `Config.max_wasm_stack` docs), so runs happen on threads started with
`STACK_BYTES` of stack. The threads are kept: wasmtime sets up per-thread state on a
thread's first wasm call, which a fresh thread per run would pay every time (~1 ms).

A job is handed to an idle thread by releasing that thread's own lock (a
`ThreadPoolExecutor` hand-off, with its shared queue, work items and Condition-based
futures, cost ~50 us; this one ~7 us). A job that finds no idle thread starts one, so
a run never waits behind another run (a run whose sub-call waits for another run would
otherwise deadlock once every thread is taken).

A job's outcome is handed over (its future set, its waiter's lock released) once its
thread is back among the idle ones, as the thread's last step before it sleeps: the woken
waiter then finds the GIL free instead of waiting for this thread's bookkeeping.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import concurrent.futures

STACK_BYTES = 256 << 20

_T = TypeVar("_T")

# A job runs its work and returns what hands its outcome over (None: nothing to hand over).
_Job = Callable[[], Callable[[], object] | None]


class _Worker:
    __slots__ = ("job", "wake")

    def __init__(self) -> None:
        self.wake = threading.Lock()
        self.wake.acquire()                  # released by `Runners._hand` with a job
        self.job: _Job | None = None


class Runners:
    """Large-stack threads, kept idle between jobs.

    Args:
        name: the threads' name prefix (seen in tracebacks and profilers).
        stack_bytes: native stack size of each thread.
    """

    def __init__(self, name: str = "codemode-run", stack_bytes: int = STACK_BYTES) -> None:
        self._name = name
        self._stack_bytes = stack_bytes
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._started = 0
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """In a child process (fork) the parent's threads do not exist: start with none."""
        self._lock = threading.Lock()
        self._idle = []

    def submit(self, fn: Callable[..., _T], *args: Any) -> concurrent.futures.Future[_T]:
        """`fn(*args)` on a runner thread; its result or exception in the future."""
        # imported here: with logging under it, ~6 ms of a new process's first run
        import concurrent.futures

        future: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def job() -> Callable[[], object] | None:
            if not future.set_running_or_notify_cancel():
                return None
            try:
                result = fn(*args)
            except BaseException as exc:
                return functools.partial(future.set_exception, exc)
            return functools.partial(future.set_result, result)
        self._hand(job)
        return future

    def call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """`fn(*args)` on a runner thread, waited for; its exception re-raised here."""
        done = threading.Lock()
        done.acquire()
        outcome: list[Any] = []

        def job() -> Callable[[], object]:
            try:
                outcome.append((True, fn(*args)))
            except BaseException as exc:
                outcome.append((False, exc))
            return done.release
        self._hand(job)
        done.acquire()
        ok, value = outcome[0]
        if not ok:
            raise value
        return value                         # type: ignore[no-any-return]

    def start_background(self, fn: Callable[[], None]) -> None:
        """Start `fn()` on a runner thread and return at once (its exception is dropped:
        background work reports through its own state)."""
        def job() -> None:
            try:
                fn()
            except BaseException:
                pass
        self._hand(job)

    def _hand(self, job: _Job) -> None:
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = _Worker()
            worker.job = job
            self._start(worker)
            return
        worker.job = job
        worker.wake.release()

    def _start(self, worker: _Worker) -> None:
        with self._lock:
            self._started += 1
            name = f"{self._name}-{self._started}"
            previous = threading.stack_size(self._stack_bytes)
            try:
                thread = threading.Thread(target=self._loop, args=(worker,), name=name,
                                          daemon=True)
                thread.start()
            finally:
                threading.stack_size(previous)

    def _loop(self, worker: _Worker) -> None:
        while True:
            job, worker.job = worker.job, None
            assert job is not None
            hand_over = job()
            with self._lock:
                self._idle.append(worker)
            if hand_over is not None:    # (taken meanwhile, this thread runs its next job next)
                hand_over()
            worker.wake.acquire()
