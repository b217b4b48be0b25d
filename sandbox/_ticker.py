"""One process-wide epoch ticker (DESIGN.md §3).

Epochs belong to the Engine and are shared by every Store, so a ticker per run would cut
the other runs short. One daemon thread increments every live Engine's epoch each
`TICK_S`; a run's wall-clock limit becomes a deadline in ticks.
"""

import math
import threading
import time
from collections.abc import Callable

import wasmtime

TICK_S = 0.005


class EpochTicker:
    def __init__(self, engines: Callable[[], list[wasmtime.Engine]]) -> None:
        self._engines = engines
        self._started = False
        self._lock = threading.Lock()

    def ensure_started(self) -> None:
        with self._lock:
            if not self._started:
                threading.Thread(target=self._loop, name="codemode-epoch", daemon=True).start()
                self._started = True

    def _loop(self) -> None:
        while True:
            time.sleep(TICK_S)
            for engine in self._engines():
                engine.increment_epoch()

    @staticmethod
    def ticks_for(seconds: float) -> int:
        """Ticks for `seconds`, plus one because the current tick is already under way."""
        return math.ceil(seconds / TICK_S) + 1
