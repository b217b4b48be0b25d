"""A restricted-tier worker process (`python -m codemode.sandbox._worker_main`), started and
supervised by `_worker_host.WorkerPool`.

It runs one program at a time with the in-process tier (`_restricted.RestrictedSandbox`),
under operating-system limits set before each run, so that C-level work the in-process
tier cannot interrupt or refuse (a huge `decimal` precision, a backtracking regular
expression, a format spec or message of gigabytes) fails here, not in the host:

- `RLIMIT_AS`: the address space the process has when the run starts, plus the run
  thread's stack, plus `limits.memory_bytes`, plus a small slack. An allocation past it
  fails with `MemoryError`, which the tier reports as `MemoryLimitExceeded`.
- `RLIMIT_CPU`: the CPU time used so far plus twice the wall-clock limit plus 2 s; past
  it the kernel ends the process (`SIGXCPU`), a backstop behind the host's watchdog,
  which kills the process at the wall-clock limit.

Messages (`_worker_wire`) travel on private duplicates of fd 0 and 1; fd 0 becomes
/dev/null and fd 1 a copy of fd 2, so nothing a run writes can reach the protocol. A
sub-call batch is sent to the host and the run waits for its answer; `SIGUSR1` cancels
the current run. End of input ends the process. What the program prints goes to the host
as it is printed (`Output`, held at most `FLUSH_S` here: `_Reports`), so the host keeps it
even if it kills this process.
"""

from __future__ import annotations

import functools
import os
import resource
import signal
import sys
import threading
import time
from typing import Any, BinaryIO

import msgspec

from . import _wire
from ._host import HostStop
from ._protocol import (
    MemoryLimitExceeded,
    RunAborted,
    RunOutcome,
    RunRequest,
    SubCallBatch,
    SubCallReply,
)
from ._restricted import RestrictedSandbox
from ._worker_wire import (
    Call,
    Done,
    Output,
    Ready,
    Reply,
    Start,
    Stopped,
    encoder,
    to_worker,
)

AS_SLACK_BYTES = 64 << 20      # the tier's own bookkeeping during a run (outcome, capture)
# The run thread's stack. The in-process tier uses 1 GiB so that deep native recursion does
# not overflow the host; here an overflow ends only this process (`GuestCrashed`), and a
# smaller reservation keeps the address-space limit close to the memory limit.
THREAD_STACK_BYTES = 128 << 20
_PAGE = os.sysconf("SC_PAGE_SIZE")
_current_cancel: threading.Event | None = None

FLUSH_S = 0.02            # the most a piece of output waits here before it is sent
FLUSH_CHARS = 1 << 16     # output held past this is sent at once
PIECE_CHARS = 1 << 20     # the most text one Output message carries


def _vm_bytes() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[0]) * _PAGE


def _rss_bytes() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * _PAGE


def set_run_limits(memory_bytes: int, wall_clock_s: float) -> None:
    """Address space and CPU time for the next run (soft limits; the hard ones stay, so a
    later run may be given more)."""
    cap = _vm_bytes() + THREAD_STACK_BYTES + memory_bytes + AS_SLACK_BYTES
    _, hard_as = resource.getrlimit(resource.RLIMIT_AS)
    if hard_as != resource.RLIM_INFINITY:
        cap = min(cap, hard_as)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard_as))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    seconds = int(usage.ru_utime + usage.ru_stime + 2 * wall_clock_s + 2) + 1
    _, hard_cpu = resource.getrlimit(resource.RLIMIT_CPU)
    if hard_cpu != resource.RLIM_INFINITY:
        seconds = min(seconds, hard_cpu)
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, hard_cpu))


class _Reports:
    """This process's messages to the host, one at a time, with the run's output
    (`output`, an `OnOutput` callback) held briefly and sent as `Output` messages: at once
    past `FLUSH_CHARS`, ahead of any other message, else by a thread of its own within
    `FLUSH_S` of being written. Output of one stream is sent in the order written."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._held: list[tuple[str, list[str]]] = []
        self._size = 0
        self._wake = threading.Event()
        threading.Thread(target=self._flusher, name="codemode-worker-output",
                         daemon=True).start()

    def send(self, message: Any) -> None:
        """Send `message` after the output held so far."""
        with self._lock:
            self._flush()
            self._stream.write(encoder.encode(message) + b"\n")

    def output(self, stream: str, text: str) -> None:
        with self._lock:
            if self._held and self._held[-1][0] == stream:
                self._held[-1][1].append(text)
            else:
                self._held.append((stream, [text]))
            self._size += len(text)
            if self._size >= FLUSH_CHARS:
                self._flush()
                return
        self._wake.set()

    def _flush(self) -> None:
        """Under `_lock`."""
        held, self._held, self._size = self._held, [], 0
        for stream, parts in held:
            text = "".join(parts)
            for start in range(0, len(text), PIECE_CHARS):
                piece = Output(stream=stream, text=text[start:start + PIECE_CHARS])
                self._stream.write(encoder.encode(piece) + b"\n")

    def _flusher(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(FLUSH_S)
            self._wake.clear()
            try:
                with self._lock:
                    self._flush()
            except OSError:           # the host went away: the process ends with its input
                return


class _Channel:
    """The run's `Dispatch`: each batch goes to the host as the program sent it
    (`_wire.encode_batch`), the run waits for the host's answer (the reply as the guest
    reads it, typed again). Closed when the run returns: a thread left running cannot talk
    to the host later."""

    def __init__(self, jobs: BinaryIO, reports: _Reports) -> None:
        self._jobs = jobs
        self._reports = reports
        self._lock = threading.Lock()
        self._open = True

    def dispatch(self, batch: SubCallBatch) -> SubCallReply:
        with self._lock:
            if not self._open:
                raise HostStop(RunAborted(message="the run is over"))
            self._reports.send(Call(batch=_wire.encode_batch(batch)))
            line = self._jobs.readline()
        if not line:
            raise HostStop(RunAborted(message="the host went away"))
        message = to_worker.decode(line)
        if isinstance(message, Reply):
            return _wire.decode_reply(message.text)
        if isinstance(message, Stopped):
            raise HostStop(message.error)
        raise HostStop(RunAborted(message="the host sent a new run during a sub-call"))

    def close(self) -> None:
        with self._lock:
            self._open = False


def _left_running() -> bool:
    return any(t.name.startswith("codemode-restricted") and t.is_alive()
               for t in threading.enumerate())


def _shared_state() -> tuple[Any, ...]:
    """A fingerprint of interpreter-wide state a run could change through the modules it
    may use and a later run could read: the registries of the abstract classes of those
    modules, the decimal module's shared contexts, the warnings filters, the modules loaded,
    the recursion limit. A run after which it differs retires this worker (`Done.recycle`):
    the tier refuses the known ways in (`register` on a class the program did not define),
    this catches the ones it does not know."""
    import abc
    import decimal
    import warnings

    registries = tuple(len(abc._get_dump(cls)[0])  # type: ignore[attr-defined]
                       for cls in _abstract_classes())
    contexts = tuple(repr(c) for c in (decimal.DefaultContext, decimal.BasicContext,
                                       decimal.ExtendedContext))
    return (registries, contexts, id(warnings.filters), len(warnings.filters),
            len(sys.modules), sys.getrecursionlimit())


@functools.cache
def _abstract_classes() -> tuple[type, ...]:
    """The abstract classes the tier's modules define (looked up once: the modules are
    imported when the worker starts)."""
    import abc

    from ._restricted_modules import ALLOWED_MODULES

    found: dict[int, type] = {}
    for name in sorted(ALLOWED_MODULES):
        module = sys.modules.get(name)
        for value in vars(module).values() if module is not None else ():
            if isinstance(value, abc.ABCMeta):
                found[id(value)] = value
    return tuple(found.values())


def run_one(request: RunRequest, jobs: BinaryIO, reports: _Reports) -> Done:
    """One run under the OS limits; `Done.recycle` when this process should not be reused.
    Its output went to the host as `Output` messages (the outcome's stdout and stderr are
    left empty), and its value is whole: the host cuts it (it keeps `output_bytes` here
    at the cap, so nothing is cut twice)."""
    global _current_cancel
    limits = request.limits
    baseline, state = _rss_bytes(), _shared_state()
    set_run_limits(limits.memory_bytes, limits.wall_clock_s)
    channel = _Channel(jobs, reports)
    cancel = _current_cancel = threading.Event()
    whole = msgspec.structs.replace(
        request, limits=msgspec.structs.replace(limits, output_bytes=limits.output_cap_bytes))
    try:
        outcome: RunOutcome = RestrictedSandbox(THREAD_STACK_BYTES).run(
            whole, channel.dispatch, cancel, on_output=reports.output)
    finally:
        channel.close()
        _current_cancel = None
    recycle = (_left_running() or _rss_bytes() - baseline > limits.memory_bytes
               or _shared_state() != state)
    outcome = msgspec.structs.replace(outcome, stdout="", stderr="", cut=(), full=None)
    return Done(outcome=outcome, recycle=recycle)


def _out_of_memory() -> Done:
    """The run's outcome when the worker's own code ran out of its address space."""
    return Done(outcome=RunOutcome(status="limit", error=MemoryLimitExceeded(
        message="the run exceeded its memory limit")), recycle=True)


def _cancel(_signum: int, _frame: Any) -> None:
    if _current_cancel is not None:
        _current_cancel.set()


def _private_streams() -> tuple[BinaryIO, BinaryIO]:
    jobs = os.fdopen(os.dup(0), "rb", buffering=0)
    reports = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return jobs, reports


def _import_the_tier_s_modules() -> None:
    """Import every module a program may use now, so that a run's first import of one does
    not count as a change of shared state (`_shared_state`)."""
    import importlib

    from ._restricted_modules import ALLOWED_MODULES

    for name in sorted(ALLOWED_MODULES):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def main() -> None:
    _import_the_tier_s_modules()
    jobs, stream = _private_streams()
    reports = _Reports(stream)
    signal.signal(signal.SIGUSR1, _cancel)
    reports.send(Ready(pid=os.getpid()))
    while True:
        line = jobs.readline()
        if not line:
            return
        try:
            message = to_worker.decode(line)
        except msgspec.DecodeError:
            return                        # the host speaks another protocol: stop
        if not isinstance(message, Start):
            continue                      # an answer to a run that is over
        try:
            done = run_one(message.request, jobs, reports)
        except MemoryError:
            done = _out_of_memory()
        try:
            reports.send(done)
        except MemoryError:
            reports.send(_out_of_memory())


if __name__ == "__main__":
    main()
