"""Fresh instances made ahead of use (DESIGN.md §3: a fresh Store and instance per run).

Instantiating the component takes about a millisecond of a run's few. `InstancePool` does
it before a run asks: it keeps up to `size` instantiated, never-run Stores per
(configuration, memory limit), hands each out once (`take`), and refills in the
background after every take. Used Stores come back through `retire` and are closed in the
background too, off the run's path.

What a run gets is the same either way: a Store no program has run in, with the run's
memory limit and an empty WASI context (nothing preopened, no environment, no network).
The run then sets its own fuel, deadline and interruption on it. Only instantiation moves:
a made-ahead instance was instantiated with fuel to spare, so its instantiation is not
counted in the run's `fuel_used` (it is when the pool was empty and the run instantiates
itself).

Bounds: `size` ready instances per key and at most `max_keys` keys (the least recently
asked-for key is dropped, its Stores closed); size 0 turns the pool off.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

import wasmtime

from ._component import Runtime

# Deadline and fuel of a Store while it is instantiated ahead of its run, which then sets
# its own: far enough that instantiation never trips them.
_AHEAD_DEADLINE_TICKS = 1 << 40
_AHEAD_FUEL = 1 << 40


class Fresh:
    """A Store no program has run in, and its instance's `run` export (None when the run
    must instantiate the component itself: `instantiate`)."""

    __slots__ = ("run_func", "store")

    def __init__(self, store: wasmtime.Store, run_func: Any | None) -> None:
        self.store = store
        self.run_func = run_func


def new_store(runtime: Runtime, memory_bytes: int) -> wasmtime.Store:
    """A Store with the run's memory limit and an empty WASI context."""
    store = wasmtime.Store(runtime.engine)
    store.set_limits(memory_size=memory_bytes)
    store.set_wasi(wasmtime.WasiConfig())   # nothing preopened, no env, no network
    return store


def instantiate(runtime: Runtime, store: wasmtime.Store) -> Any:
    """Instantiate the component in `store`; its `run` export."""
    instance = runtime.linker.instantiate(store, runtime.component)
    run_func = instance.get_func(store, "run")
    assert run_func is not None, "the guest component exports no `run`"
    return run_func


_Key = tuple[int, int]          # (id of the Runtime, memory limit in bytes)


class InstancePool:
    """Ready instances per (runtime, memory limit); see the module docstring.

    Args:
        submit: runs a refill in the background (on a thread whose native stack is large
            enough for wasm, like the run threads).
        size: ready instances kept per key; 0 turns the pool off.
        max_keys: keys kept at once.
    """

    def __init__(self, submit: Callable[[Callable[[], None]], object], size: int = 1,
                 max_keys: int = 4) -> None:
        if size < 0 or max_keys < 1:
            raise ValueError("size must be >= 0 and max_keys >= 1")
        self.size = size
        self.max_keys = max_keys
        self._submit = submit
        self._lock = threading.Lock()
        self._ready: OrderedDict[_Key, tuple[Runtime, int, deque[Fresh]]] = OrderedDict()
        self._retired: list[wasmtime.Store] = []
        self._refilling = False

    def take(self, runtime: Runtime, memory_bytes: int) -> Fresh:
        """A fresh Store for one run: a ready one, or a new empty one (`run_func` None)
        when none is ready. Starts a refill."""
        if self.size == 0:
            return Fresh(new_store(runtime, memory_bytes), None)
        key = (id(runtime), memory_bytes)
        dropped: list[Fresh] = []
        with self._lock:
            entry = self._ready.get(key)
            if entry is None:
                entry = self._ready[key] = (runtime, memory_bytes, deque())
                while len(self._ready) > self.max_keys:
                    _, (_, _, old) = self._ready.popitem(last=False)
                    dropped += old
            self._ready.move_to_end(key)
            fresh = entry[2].popleft() if entry[2] else None
            self._retired += [f.store for f in dropped]
        self._kick()
        return fresh or Fresh(new_store(runtime, memory_bytes), None)

    def retire(self, store: wasmtime.Store) -> None:
        """Hand back a used Store; it is closed in the background, never reused."""
        if self.size == 0:
            store.close()
            return
        with self._lock:
            self._retired.append(store)
        self._kick()

    def ready(self, runtime: Runtime, memory_bytes: int) -> int:
        """Instances ready for this key now."""
        with self._lock:
            entry = self._ready.get((id(runtime), memory_bytes))
            return len(entry[2]) if entry else 0

    def _kick(self) -> None:
        with self._lock:
            if self._refilling:
                return
            self._refilling = True
        try:
            self._submit(self._refill)
        except RuntimeError:            # the interpreter is shutting down
            with self._lock:
                self._refilling = False

    def _refill(self) -> None:
        try:
            while True:
                with self._lock:
                    retired, self._retired = self._retired, []
                    wanted = [(rt, mem, q) for rt, mem, q in self._ready.values()
                              if len(q) < self.size]
                    if not retired and not wanted:
                        self._refilling = False
                        return
                for store in retired:
                    store.close()
                if wanted:
                    runtime, memory_bytes, queue = wanted[-1]      # most recently asked
                    fresh = self._make(runtime, memory_bytes)
                    with self._lock:
                        if fresh is None:          # cannot instantiate ahead: stop trying
                            self._refilling = False
                            return
                        if (id(runtime), memory_bytes) in self._ready \
                                and len(queue) < self.size:
                            queue.append(fresh)
                            fresh = None
                    if fresh is not None:
                        fresh.store.close()
        except BaseException:
            with self._lock:
                self._refilling = False
            raise

    @staticmethod
    def _make(runtime: Runtime, memory_bytes: int) -> Fresh | None:
        store = new_store(runtime, memory_bytes)
        try:
            store.set_epoch_deadline(_AHEAD_DEADLINE_TICKS)
            if runtime.config.fuel:
                store.set_fuel(_AHEAD_FUEL)
            return Fresh(store, instantiate(runtime, store))
        except Exception:               # e.g. a memory limit below the instance's needs
            store.close()
            return None
