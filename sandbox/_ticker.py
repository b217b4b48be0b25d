"""One process-wide epoch ticker (docs/design.md §3).

Epochs belong to the Engine and are shared by every Store, so a ticker per run would cut
the other runs short. One daemon thread increments every live Engine's epoch each
`TICK_S`; a run's wall-clock limit becomes a deadline in ticks.
"""

import _thread
import math
import os
import threading
import time
from collections.abc import Callable

import wasmtime

TICK_S = 0.005


class EpochTicker:
    """Args:
        engines: every Engine to tick, asked at each tick.
        on_tick: called on the ticker's thread after each tick (the instance pool starts
            its background from there, so that no run wakes a thread for it).
    """

    def __init__(self, engines: Callable[[], list[wasmtime.Engine]],
                 on_tick: Callable[[], None] | None = None) -> None:
        self._engines = engines
        self._on_tick = on_tick
        self._lock = threading.Lock()
        self._running = False
        self._started = 0.0
        self._done = 0
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """In a child process (fork) the parent's thread does not exist: start again."""
        self._lock = threading.Lock()
        self._running = False

    def ensure_started(self) -> None:
        """Start the ticking thread, once. Not with `threading.Thread.start`, which waits
        until the new thread runs (up to milliseconds on a loaded machine, on the path of
        a process's first run): a run catches up itself before setting its deadline."""
        if self._running:            # (read without the lock: set once, under it)
            return
        with self._lock:
            if not self._running:
                self._started = time.monotonic()
                _thread.start_new_thread(self._loop, ())
                self._running = True

    def catch_up(self) -> None:
        """Advance every engine to the epoch the clock says it should be at.

        Ticks are counted from the clock, not from sleeps: under CPU load a sleep
        overruns, and a tick per sleep would let deadlines drift late. A run calls this
        right before it sets its deadline, so the deadline is relative to an epoch that is
        current, not one a late catch-up would then jump past.
        """
        due = int((time.monotonic() - self._started) / TICK_S)
        if due <= self._done:        # on time (the common case): no lock, no engine call
            return
        with self._lock:
            due = int((time.monotonic() - self._started) / TICK_S)
            for _ in range(due - self._done):
                for engine in self._engines():
                    engine.increment_epoch()
            self._done = max(self._done, due)

    def _loop(self) -> None:
        while True:
            # Wake at the next tick's boundary, not a tick after the last wake: a run's
            # `catch_up` then finds the epoch current, but for the wake's own latency.
            next_tick = self._started + (self._done + 1) * TICK_S
            time.sleep(max(next_tick - time.monotonic(), TICK_S / 10))
            self.catch_up()
            if self._on_tick is not None:
                try:
                    self._on_tick()
                except Exception:    # never stop ticking: every run's deadline needs it
                    pass

    @staticmethod
    def ticks_for(seconds: float) -> int:
        """Ticks for `seconds`, plus one because the current tick is already under way."""
        return math.ceil(seconds / TICK_S) + 1
