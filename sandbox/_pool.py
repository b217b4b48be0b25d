"""Fresh instances made ahead of use (docs/design.md §3: a fresh Store and instance per run).

A run's own work in a new instance is a fraction of what a new instance costs it: the
Store's set-up, instantiation (~1 ms), the first touches of the instance's memory and
tables by the guest's runtime (~2 ms: a reused instance runs `x = 1` in ~0.4 ms, a new
one in ~2.5 ms), and the Store's teardown (~0.3 ms). `InstancePool` moves these off the
run's path, into the idle time between runs: it keeps up to `size` instances per key
ready, each instantiated and then *prepared*: the guest's runtime ran its own built-in
warm-up program in it (`guest_main.PREPARE`: no program's code, no host calls, no output)
and forgot it, as the snapshot's warm-up does, then bound the tools of the key's latest
run, since the next run of the same caller most likely has the same (`Fresh.tools`): a run
with those tools is sent none, and its program's globals are ready (~0.15 ms of a paced
run with 8 tools); a run with others has those unbound and its own bound. It hands each
out once (`take`), and closes used Stores in the background (`retire`).

The background works only while no run of this process is under way and none started or
ended for `IDLE_S`, one step (make, prepare or close one instance) at a time, and a run
that starts during a step waits for it (`STEP_WAIT_S`): making and closing instances maps
and unmaps memory, and a run's page faults wait for that, so overlapping them slowed runs
~2.5x. Runs back to back therefore get no ready instance and make their own, as without
the pool; runs with a few milliseconds between them get a prepared one.

What a run gets is the same either way: a Store no program has run in, with the run's
memory limit, WASI stdout/stderr pipes of its own (`_capture.PipeCapture`, bound to the
run's captures when it takes the instance) and an otherwise empty WASI context (nothing
preopened, no environment, no network). The run then sets its own fuel, epoch deadline
and interruption on the Store (`sandbox._wasm`), so from its first instruction the
instance is under the run's limits. Instantiation and preparation happen with fuel and a
deadline to spare, and are not counted in the run's `fuel_used` or duration.

The pool's key is everything fixed before instantiation: the Runtime (Engine
configuration: fuel metering, wasm stack; and so the Engine and Component), its plain
Linker (`Runtime.linker`: a request needing another Linker never asks the pool) and the
memory limit. The WASI context is the same for every run.

Bounds: `size` ready instances per key, at most `max_keys` keys (the least recently asked
for is dropped and its Stores closed), and at most `max_bytes // INSTANCE_BYTES` ready
instances in all; size 0 turns the pool off. A key whose instance cannot be made ahead
(e.g. a memory limit too small to prepare in) is not tried again.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

import wasmtime

from . import _interrupt
from ._capture import PipeCapture
from ._component import Runtime

# The guest's own warm-up, instead of a run request (`guest_main.WitWorld.run`), and its
# reply.
PREPARE = '{"prepare": true}'
PREPARED = '{"prepared": true}'
# The same warm-up with tool bindings made too (`guest_main.PREPARE_WITH_TOOLS`): this,
# the tool specs' JSON, "}".
PREPARE_WITH_TOOLS = '{"prepare": true, "tools": '

# Deadline (epoch ticks) and fuel of a Store while it is made ahead of its run, which
# then sets its own: far enough that instantiation and preparation never trip them.
_AHEAD_DEADLINE_TICKS = 1 << 40
_AHEAD_FUEL = 1 << 40

IDLE_S = 0.005
"""Seconds without a run starting or ending before the pool works (closes, makes or
prepares an instance, ~0.3-3 ms each). It never works while a run of this process is under
way: making and closing instances maps and unmaps memory, and a run's page faults wait
for that (a run slows ~2.5x while another thread instantiates and closes Stores). Nor in
the gaps between runs that follow each other: when every core is busy, a process waiting
for its next time slice sees gaps of a few milliseconds between back-to-back runs, and
preparing an instance in them costs more CPU than it saves the run that takes it. At 2 ms,
two processes running back to back on two busy cores made 247-282 runs/s at 3.6-4.0 ms
of CPU and ~680 page faults a run; at 5 ms, 332-341 runs/s at 3.0 ms and ~589, and runs
20 ms apart still get a prepared instance (docs/benchmarks.md, "Page faults")."""

STEP_WAIT_S = 0.05
"""Longest a run waits, in seconds, for the pool's step under way to end (one step takes
~0.3-3 ms); past it the run goes on alongside."""

BUSY_POLL_S = 0.05
"""For a pool nobody ticks (`InstancePool.tick`): longest its background sleeps, in seconds,
between looks at whether the runs under way ended (it starts at `IDLE_S` and doubles). A
ticked pool's background stops instead while runs are under way, and the next tick after
they end starts it again."""

MAX_RETIRED = 1
"""Used Stores left to close in the background at most; past it a run closes its own."""

INSTANCE_BYTES = 8 << 20
"""What one ready instance is assumed to keep resident, in bytes, for `max_bytes`: about
twice the PSS a prepared instance adds (`python -m benchmarks.footprint`)."""


class Fresh:
    """One Store for exactly one run, with its output pipes; `func` is the instance's
    `run` export, or None until `instantiate`; `tools`, the tool specs' JSON (bytes) the
    guest bound when it was prepared (`prepared`), or None."""

    __slots__ = ("func", "output", "prepared", "runtime", "store", "tools")

    def __init__(self, runtime: Runtime, store: wasmtime.Store, output: PipeCapture) -> None:
        self.runtime = runtime
        self.store = store
        self.output = output
        self.func: Any | None = None
        self.prepared = False
        self.tools: bytes | None = None

    @classmethod
    def new(cls, runtime: Runtime, memory_bytes: int) -> Fresh:
        """A Store with the memory limit (bytes) and a WASI context whose stdout and stderr
        are new pipes (bound to no capture yet); not instantiated.

        Raises:
            OSError: no pipes could be made.
        """
        store = wasmtime.Store(runtime.engine)
        output = PipeCapture()
        try:
            store.set_limits(memory_size=memory_bytes)
            _interrupt.prepare(store)
            wasi = wasmtime.WasiConfig()             # nothing preopened, no env, no network
            wasi.argv = ["<program>"]                # sys.argv (argparse reads argv[0])
            output.attach(wasi)
            store.set_wasi(wasi)
        except BaseException:
            output.close()
            store.close()
            raise
        return cls(runtime, store, output)

    def instantiate(self, linker: Any = None) -> None:
        """Instantiate the component with `linker` (default: the plain Linker).

        Raises:
            wasmtime.WasmtimeError: instantiation trapped (a limit, an interruption).
        """
        runtime = self.runtime
        instance = (linker or runtime.linker).instantiate(self.store, runtime.component)
        self.func = runtime.run_export.func(instance, self.store)

    def call(self, text: str) -> str:
        """The instance's `run(text)` (after `instantiate`).

        Raises:
            wasmtime.WasmtimeError: the instance trapped.
        """
        assert self.func is not None, "call before instantiate"
        return self.runtime.run_export.call(self.func, self.store, text)

    def close(self) -> None:
        """Read what the instance wrote (into the bound captures), close its pipes, then
        close the Store."""
        self.output.close()
        self.store.close()


def _made(runtime: Runtime, memory_bytes: int) -> Fresh | None:
    """A new instance, instantiated, or None when that failed."""
    try:
        fresh = Fresh.new(runtime, memory_bytes)
    except OSError:
        return None
    try:
        fresh.store.set_epoch_deadline(_AHEAD_DEADLINE_TICKS)
        if runtime.config.fuel:
            fresh.store.set_fuel(_AHEAD_FUEL)
        fresh.instantiate()
        return fresh
    except Exception:                   # e.g. a memory limit below what instantiation needs
        fresh.close()
        return None


def _prepare(fresh: Fresh, tools: bytes | None = None) -> bool:
    """Run the guest's own warm-up in `fresh` (made by `_made`), binding `tools` (the tool
    specs' JSON, as a run request carries them) if given; False if it failed (the instance
    must then be discarded)."""
    request = PREPARE if tools is None else f"{PREPARE_WITH_TOOLS}{tools.decode()}}}"
    try:
        if fresh.call(request) == PREPARED:
            fresh.prepared = True
            fresh.tools = tools
            return True
    except Exception:                   # e.g. a memory limit below what preparing needs
        pass
    return False


_Key = tuple[int, int]          # (id of the Runtime, memory limit in bytes)


class _Entry:
    __slots__ = ("memory_bytes", "ready", "runtime", "tools")

    def __init__(self, runtime: Runtime, memory_bytes: int) -> None:
        self.runtime = runtime
        self.memory_bytes = memory_bytes
        self.ready: deque[Fresh] = deque()
        self.tools: bytes | None = None     # the latest run's, bound in the next prepared


class InstancePool:
    """Ready instances per (Runtime, memory limit); see the module docstring.

    Args:
        submit: starts a call in the background, on a thread whose native stack is large
            enough for wasm (as the run threads are); may raise RuntimeError at shutdown.
        size: ready instances kept per key; 0 turns the pool off.
        max_keys: keys kept at once.
        max_bytes: bound on the memory of all ready instances, in bytes, counted as
            `INSTANCE_BYTES` each.
    Raises:
        ValueError: a negative size or max_bytes, or max_keys below 1.
    """

    def __init__(self, submit: Callable[[Callable[[], None]], object], size: int = 1,
                 max_keys: int = 4, max_bytes: int = 64 << 20) -> None:
        if size < 0 or max_keys < 1 or max_bytes < 0:
            raise ValueError("size and max_bytes must be >= 0 and max_keys >= 1")
        self.size = size
        self.max_keys = max_keys
        self.max_ready = max_bytes // INSTANCE_BYTES
        self._submit = submit
        self._lock = threading.Lock()
        self._step_done = threading.Condition(self._lock)
        self._stepping = False                   # a background step is under way
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()
        self._failed: set[_Key] = set()
        self._unpreparable: set[_Key] = set()
        self._retired: list[Fresh] = []
        self._working = False
        self._active = 0                         # runs between `take` and `retire`
        self._last_activity = time.monotonic()   # of the last `take` or `retire`
        self._ticked = False                     # `tick` starts the background, not runs
        forked = weakref.WeakMethod(self._forked)
        os.register_at_fork(after_in_child=lambda: (method := forked()) and method())

    def take(self, runtime: Runtime, memory_bytes: int,
             tools: bytes | None = None) -> Fresh | None:
        """A ready instance for one run, never handed out again, or None when none is
        ready (the run then makes its own: `Fresh.new`). The refill follows in the
        background once the process is quiet (`tick`); the instances it prepares have the
        bindings of `tools` (the run's tool specs' JSON) made ahead, since the next run of
        the same caller most likely has the same tools (`Fresh.tools` says which ones an
        instance has)."""
        if self.size == 0 or self.max_ready == 0:
            return None
        key = (id(runtime), memory_bytes)
        with self._lock:
            self._active += 1              # the background stops after its current step,
            if self._stepping:             # which the run waits for rather than contend
                self._step_done.wait_for(lambda: not self._stepping, STEP_WAIT_S)
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry(runtime, memory_bytes)
                while len(self._entries) > self.max_keys:
                    _, old = self._entries.popitem(last=False)
                    self._retired += old.ready
            self._entries.move_to_end(key)
            entry.tools = tools
            fresh = entry.ready.popleft() if entry.ready else None
            self._last_activity = time.monotonic()
        return fresh

    def tick(self) -> None:
        """Start the background if it has work and no run is under way or started or ended
        in the last `IDLE_S` seconds. Called by the epoch ticker at each of its ticks
        (`sandbox._wasm`), so that a run never wakes a thread: waking the background at a
        run's start or end took the GIL from the run, or from its caller just as it woke
        to read the outcome. A pool that is never ticked is started by `retire` instead."""
        with self._lock:
            self._ticked = True
            if self._working or self._active or \
                    time.monotonic() - self._last_activity < IDLE_S:
                return
        self._kick()

    def retire(self, fresh: Fresh) -> None:
        """Hand back a Store after its one run: what it wrote is read into the run's
        captures now; the Store is closed in the background, never reused."""
        fresh.output.finish()
        if self.size == 0 or self.max_ready == 0:
            fresh.close()
            return
        with self._lock:
            self._active = max(self._active - 1, 0)
            self._last_activity = time.monotonic()
            close_now = len(self._retired) >= MAX_RETIRED
            if not close_now:
                self._retired.append(fresh)
        if close_now:                   # no idle time to close them in: close it here
            fresh.close()
        if not self._ticked:
            self._kick()

    def _forked(self) -> None:
        """In a child process (fork): the parent's instances, lock and background thread
        are not this process's to use; start empty."""
        self._lock = threading.Lock()
        self._step_done = threading.Condition(self._lock)
        self._entries = OrderedDict()
        self._retired = []
        self._failed.clear()
        self._unpreparable.clear()
        self._working = self._stepping = False
        self._active = 0

    def ready(self, runtime: Runtime, memory_bytes: int) -> int:
        """Instances ready for this key now."""
        with self._lock:
            entry = self._entries.get((id(runtime), memory_bytes))
            return len(entry.ready) if entry else 0

    def clear(self) -> None:
        """Drop every ready instance (closed in the background) and forget failed keys."""
        with self._lock:
            for entry in self._entries.values():
                self._retired += entry.ready
            self._entries.clear()
            self._failed.clear()
            self._unpreparable.clear()
        self._kick()

    def _kick(self) -> None:
        with self._lock:
            if self._working or not self._has_work():
                return
            self._working = True
        try:
            self._submit(self._work)
        except RuntimeError:            # the interpreter is shutting down
            with self._lock:
                self._working = False

    def _wanted(self) -> tuple[_Key, _Entry] | None:
        """The key to make an instance for next (the most recently asked for first), under
        `_lock`; None when every key is full or the memory bound is reached."""
        if sum(len(e.ready) for e in self._entries.values()) >= self.max_ready:
            return None
        for key, entry in reversed(self._entries.items()):
            if len(entry.ready) < self.size and key not in self._failed:
                return key, entry
        return None

    def _unprepared(self) -> tuple[_Key, _Entry, Fresh] | None:
        """A ready instance to prepare next, taken out of its queue, under `_lock`."""
        for key, entry in reversed(self._entries.items()):
            if key in self._unpreparable:
                continue
            for fresh in entry.ready:
                if not fresh.prepared:
                    entry.ready.remove(fresh)
                    return key, entry, fresh
        return None

    def _work(self) -> None:
        """While no run is under way and none started or ended for `IDLE_S`: close retired
        Stores, make instances, prepare them, one step at a time, until nothing is left to
        do. While runs are under way, a ticked pool's background stops (the next quiet tick
        starts it again); an unticked one looks again every `IDLE_S`, doubling up to
        `BUSY_POLL_S`."""
        busy_s = IDLE_S
        try:
            while True:
                wait_s, step = 0.0, None
                with self._lock:
                    if not self._has_work():
                        self._working = False
                        return
                    if self._active and self._ticked:
                        self._working = False
                        return
                    if self._active:
                        wait_s, busy_s = busy_s, min(busy_s * 2, BUSY_POLL_S)
                    else:
                        busy_s = IDLE_S
                        wait_s = IDLE_S - (time.monotonic() - self._last_activity)
                    if wait_s <= 0:
                        step = self._next_step()
                        self._stepping = step is not None
                if step is None:
                    time.sleep(max(wait_s, IDLE_S / 10))
                    continue
                try:
                    step()
                finally:
                    with self._lock:
                        self._stepping = False
                        self._step_done.notify_all()
        except BaseException:
            with self._lock:
                self._working = False
            raise

    def _has_work(self) -> bool:
        return bool(self._retired) or self._wanted() is not None or any(
            not f.prepared and k not in self._unpreparable
            for k, e in self._entries.items() for f in e.ready)

    def _next_step(self) -> Callable[[], None] | None:
        """The next background step, under `_lock`: make an instance for the key that
        wants one most, else prepare a ready instance, else close a retired Store (the
        next run needs the first two, not the last)."""
        wanted = self._wanted()
        if wanted is not None:
            key, entry = wanted
            return lambda: self._put(key, entry, _made(entry.runtime, entry.memory_bytes))
        upgrade = self._unprepared()
        if upgrade is not None:
            key, entry, fresh = upgrade
            tools = entry.tools

            def prepare() -> None:
                if _prepare(fresh, tools):
                    self._put(key, entry, fresh)
                    return
                with self._lock:
                    self._unpreparable.add(key)
                fresh.close()
            return prepare
        if self._retired:
            return self._retired.pop().close
        return None

    def _put(self, key: _Key, entry: _Entry, made: Fresh | None) -> None:
        """Queue a made (or prepared) instance for its key, if the key still wants it."""
        with self._lock:
            if made is None:
                self._failed.add(key)
            elif self._entries.get(key) is entry and len(entry.ready) < self.size:
                entry.ready.append(made)
                made = None
        if made is not None:             # its key was dropped meanwhile
            made.close()
