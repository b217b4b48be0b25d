"""`RestrictedProcessSandbox`: the restricted tier with each run in a supervised worker
process (docs/security.md, "The restricted tier").

The program runs in a worker (`_worker_main.py`) under the in-process tier's rewrite and
guards, and under operating-system limits on address space and CPU time set there before
each run. This process supervises it:

- a watchdog kills the worker once the run is `KILL_GRACE_S` past its wall-clock limit
  (the worker's own stop lands first whenever the program runs Python code; one long C
  call, such as a backtracking regular expression, ends here), and when its resident
  memory grows past `limits.memory_bytes` plus `RSS_SLACK_BYTES`;
- every sub-call batch the worker sends goes through this process's
  `RunHost.dispatch_batch` (decoded, counted against `max_subcalls`, its wait bounded by
  the deadline) and then the caller's `Dispatch`, on the caller's thread, as in the other
  tiers;
- the program's output arrives as it is printed (`Output` messages) and is captured here,
  so it is kept, and handed to the caller's `on_output`, even when the worker is killed;
- the outcome the worker reports is checked again: output and value sizes, the sub-call
  count, a pause the host did not ask for. A worker that dies, sends malformed or
  oversized messages, or is killed ends the run with a typed error, never an exception.

Workers are reused across runs (`WorkerPool`, shared by every instance unless one is
given) and replaced after `max_runs` runs, after a run that left a thread running or
memory held, and after any kill. A worker gets a minimal environment (none of the host's
variables but `PATH`, locale and `TZ`), so the host's secrets are not in its process.
"""

from __future__ import annotations

import atexit
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import msgspec
from msgspec import UNSET

from ._capture import OnOutput
from ._host import GuestOk, GuestOutcome, HostStop, RunHost, outcome, refused_as_too_large
from ._protocol import (
    AnyRunError,
    Dispatch,
    GuestCrashed,
    MemoryLimitExceeded,
    RunAborted,
    RunOutcome,
    RunPaused,
    RunRequest,
    TimeLimitExceeded,
)
from ._restricted_modules import ALLOWED_MODULES
from ._worker_wire import (
    Call,
    Done,
    Output,
    Ready,
    Reply,
    Start,
    Stopped,
    encoder,
    from_worker,
)

KILL_GRACE_S = 0.5          # past the wall-clock limit before the worker is killed
CANCEL_GRACE_S = 1.0        # after a cancel before the worker is killed
RSS_SLACK_BYTES = 128 << 20
STARTUP_S = 60.0
SAMPLE_S = 0.02
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "HOME", "TMPDIR")
_PAGE = os.sysconf("SC_PAGE_SIZE")
_OVERSIZE = bytes(1)        # the reader's sign (by identity) for a message over the cap


class _Worker:
    """One worker process and the thread that reads its messages."""

    def __init__(self) -> None:
        env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
        env["MALLOC_ARENA_MAX"] = "2"        # arenas reserve address space under RLIMIT_AS
        package = __spec__.parent if __spec__ is not None else "codemode.sandbox"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", f"{package}._worker_main"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, start_new_session=True)
        self.cap = 1 << 20                   # bytes of one message; set per run
        self.runs = 0
        self.messages: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, name="codemode-worker-reader", daemon=True).start()
        try:
            first = self.messages.get(timeout=STARTUP_S)
            ready = from_worker.decode(first) if first else None
        except (queue.Empty, msgspec.DecodeError):
            ready = None
        if not isinstance(ready, Ready):
            self.kill()
            raise RuntimeError("the restricted-tier worker process did not start")
        self.pid = ready.pid

    def _read(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        try:
            while True:
                line = stream.readline(self.cap + 1)
                # The cap may have grown (a run sets it) while this read waited: read on.
                while line and not line.endswith(b"\n") and len(line) <= self.cap:
                    more = stream.readline(self.cap + 1 - len(line))
                    if not more:
                        break
                    line += more
                if not line:
                    break
                if not line.endswith(b"\n"):
                    self.messages.put(_OVERSIZE)
                    break
                self.messages.put(line)
        except (OSError, ValueError):
            pass
        self.messages.put(None)

    def send(self, message: Any) -> bool:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            stdin.write(encoder.encode(message) + b"\n")
            stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_bytes(self) -> int:
        try:
            with open(f"/proc/{self.pid}/statm", "rb") as f:
                return int(f.read().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            return 0

    def signal(self, signum: int) -> None:
        try:
            os.kill(self.pid, signum)
        except OSError:
            pass

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


class WorkerPool:
    """Idle worker processes, reused across runs.

    Args:
        max_runs: runs one worker serves before it is replaced.
        keep_idle: idle workers kept (a retired worker is replaced in the background up
            to this number, so the next run does not wait for a start).
    """

    def __init__(self, max_runs: int = 100, keep_idle: int = 1) -> None:
        self.max_runs = max_runs
        self.keep_idle = keep_idle
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False

    @property
    def idle(self) -> int:
        """Idle workers now (a replacement started in the background counts once up)."""
        with self._lock:
            return len(self._idle)

    def take(self) -> _Worker:
        """An idle live worker, or a new one.

        Raises:
            RuntimeError: a new worker process did not start.
        """
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.alive():
                    return worker
                worker.kill()
        return _Worker()

    def give(self, worker: _Worker, *, reuse: bool) -> None:
        """Return a worker after a run: kept when `reuse` and under `max_runs`, else
        killed and replaced in the background."""
        worker.runs += 1
        if reuse and worker.runs < self.max_runs and worker.alive():
            with self._lock:
                if not self._closed and len(self._idle) < self.keep_idle:
                    self._idle.append(worker)
                    return
        worker.kill()
        threading.Thread(target=self._spare, name="codemode-worker-spare", daemon=True).start()

    def _spare(self) -> None:
        with self._lock:
            if self._closed or len(self._idle) >= self.keep_idle:
                return
        try:
            worker = _Worker()
        except RuntimeError:
            return
        with self._lock:
            if not self._closed and len(self._idle) < self.keep_idle:
                self._idle.append(worker)
                return
        worker.kill()

    def close(self) -> None:
        """Kill the idle workers; the pool starts new ones if used again."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()


_shared_pool: WorkerPool | None = None
_shared_lock = threading.Lock()


def shared_pool() -> WorkerPool:
    """The process-wide pool `RestrictedProcessSandbox` uses by default."""
    global _shared_pool
    with _shared_lock:
        if _shared_pool is None:
            _shared_pool = WorkerPool()
            atexit.register(_shared_pool.close)
        return _shared_pool


class _Supervised:
    """One run's supervision: the messages of its worker, the watchdog, the host's view."""

    def __init__(self, worker: _Worker, host: RunHost, request: RunRequest) -> None:
        self.worker = worker
        self.host = host
        self.limits = request.limits
        self.stopped: AnyRunError | None = None    # the host ended the run at a batch
        self.killed: AnyRunError | None = None     # the host killed the worker
        self.done: Done | None = None
        self.baseline_rss = worker.rss_bytes()
        self.deadline = host.started + request.limits.wall_clock_s + KILL_GRACE_S
        self.cancel_sent_at: float | None = None

    def kill(self, error: AnyRunError) -> None:
        if self.killed is None:
            self.killed = error
        self.worker.kill()

    def watch(self) -> None:
        """Serve the worker's batches until it reports, dies, or is killed."""
        while self.done is None and self.killed is None:
            try:
                line = self.worker.messages.get(timeout=SAMPLE_S)
            except queue.Empty:
                self._check()
                continue
            if line is None:
                self.killed = self._death()
            elif line is _OVERSIZE:
                self.kill(GuestCrashed(message="the worker sent a message over "
                                               f"{self.worker.cap} bytes"))
            else:
                self._handle(line)
            self._check()

    def _handle(self, line: bytes) -> None:
        try:
            message = from_worker.decode(line)
        except msgspec.DecodeError as exc:
            self.kill(GuestCrashed(message=f"the worker sent a malformed message: {exc}"))
            return
        if isinstance(message, Output):
            capture = self.host.stdout if message.stream == "stdout" else self.host.stderr
            capture.write(message.text.encode("utf-8", "surrogatepass"))
        elif isinstance(message, Done):
            self.done = message
        elif isinstance(message, Call):
            try:
                reply: Reply | Stopped = Reply(
                    text=self.host.dispatch_batch(message.batch))
            except HostStop as stop:
                self.stopped = self.stopped or stop.error
                reply = Stopped(error=stop.error)
            if not self.worker.send(reply):
                self.killed = self._death()
        else:
            self.kill(GuestCrashed(message="the worker sent an unexpected message"))

    def _check(self) -> None:
        if self.done is not None or self.killed is not None:
            return
        now = time.monotonic()
        if now >= self.deadline:
            self.kill(TimeLimitExceeded(
                message=f"the run exceeded its wall-clock limit of {self.limits.wall_clock_s}"
                        " s; its worker process was killed"))
        elif self.host.cancel.is_set():
            if self.cancel_sent_at is None:
                self.cancel_sent_at = now
                self.worker.signal(signal.SIGUSR1)
            elif now - self.cancel_sent_at > CANCEL_GRACE_S:
                self.kill(RunAborted(message="the run was cancelled; its worker process "
                                             "was killed"))
        elif self.baseline_rss:
            growth = self.worker.rss_bytes() - self.baseline_rss
            if growth > self.limits.memory_bytes + RSS_SLACK_BYTES:
                self.kill(MemoryLimitExceeded(
                    message=f"the run's worker process grew by {growth >> 20} MiB, over the "
                            f"memory limit of {self.limits.memory_bytes} bytes; it was killed"))

    def _death(self) -> AnyRunError:
        try:
            code = self.worker.proc.wait(1.0)    # its pipe closed: it ends, or is ended
        except subprocess.TimeoutExpired:
            self.worker.kill()
            code = self.worker.proc.wait()
        self.worker.kill()
        if code == -signal.SIGXCPU:
            return TimeLimitExceeded(message="the run's worker process used up its CPU time "
                                             "limit and was ended")
        return GuestCrashed(message=f"the run's worker process died (exit status {code})")

    def ended(self) -> GuestOutcome | AnyRunError:
        """How the run ended, as this process saw it (its output is in the captures)."""
        if self.killed is not None:
            return self.killed
        assert self.done is not None
        reported = self.done.outcome
        if self.stopped is not None:
            return self.stopped
        error = reported.error
        if isinstance(error, RunPaused):
            return GuestCrashed(message="the worker reported a pause the host did not ask for")
        if error is None and reported.status != "ok":
            return GuestCrashed(message="the worker reported a failure without an error")
        if error is not None:
            return error
        if reported.value is UNSET:
            return GuestOk()
        return GuestOk(value=msgspec.Raw(encoder.encode(reported.value)))


class RestrictedProcessSandbox:
    """The restricted tier, each run in a supervised worker process (module docstring).

    The program meets the same rewrite, guards, imports and namespace as in
    `RestrictedSandbox` (the in-process tier, for trusted code), but it cannot take this
    process down: a C call that does not return is killed at the wall-clock limit, one that
    allocates fails at the worker's address-space limit, and this process's memory does not
    grow with the program's.

    Args:
        pool: the worker processes to use (default: one pool shared by the process).
    """

    allowed_modules: frozenset[str] = ALLOWED_MODULES

    def __init__(self, pool: WorkerPool | None = None) -> None:
        self._pool = pool

    def run(self, request: RunRequest, dispatch: Dispatch,
            cancel: threading.Event | None = None, *,
            on_output: OnOutput | None = None) -> RunOutcome:
        """Run one program in a worker process and report how it ended.

        Args:
            request: as for `RestrictedSandbox.run` (`fuel`, `stack_bytes`,
                `max_concurrent_subcalls` and `tape` are not applied).
            dispatch: called on this (the caller's) thread per sub-call batch.
            cancel: set from any thread to stop the run (`RunAborted`).
            on_output: called with each piece of stdout and stderr as it arrives from the
                worker (within about `_worker_main.FLUSH_S` of being written), on this
                thread (`sandbox.OnOutput`).
        Returns:
            The outcome; a tripped limit, a killed or dead worker is a typed `error`
            (`TimeLimitExceeded`, `MemoryLimitExceeded`, `GuestCrashed`), never an
            exception. Returns within about `wall_clock_s + KILL_GRACE_S`, plus the time
            of a sub-call in progress at the deadline. When the worker was killed, what it
            printed in its last `FLUSH_S` may be missing.
        Raises:
            RuntimeError: no worker process could be started.
        """
        refused = refused_as_too_large(request.code, request.limits)
        if refused is not None:           # (not sent to a worker at all)
            return refused
        pool = self._pool or shared_pool()
        worker = pool.take()
        limits = request.limits
        worker.cap = 8 * (limits.result_bytes + limits.output_cap_bytes) + (16 << 20)
        host = RunHost(limits, dispatch, cancel, on_output)
        run = _Supervised(worker, host, request)
        if not worker.send(Start(request=request)):
            run.killed = run._death()
        try:
            run.watch()
        finally:
            reuse = run.done is not None and not run.done.recycle and run.killed is None
            pool.give(worker, reuse=reuse)
        return outcome(host, run.ended(), duration_s=time.monotonic() - host.started)
