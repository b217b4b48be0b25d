"""Per-run interruption through wasmtime's epoch-deadline callback.

The epoch deadline alone can only end a run at a deadline fixed when it starts: a Store may
not be touched from another thread while wasm runs, and bumping the shared Engine epoch
would interrupt every other run. So each Store's deadline is set a short interval ahead
(`CHECK_TICKS`), and when it passes wasmtime calls `_on_deadline` on the run's own thread,
which either extends it by another interval or ends the run (trap) once the run is
cancelled or past its wall-clock limit. A cancelled run (an outer abort, Ctrl-C) therefore
stops within about `CHECK_TICKS` ticks even in a loop that never calls the host.

wasmtime-py does not wrap `wasmtime_store_epoch_deadline_callback`; this module calls it
through wasmtime-py's own generated bindings.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

import wasmtime
from wasmtime import _bindings

CHECK_TICKS = 20              # 100 ms at the ticker's 5 ms tick
_CONTINUE = 0                 # WASMTIME_UPDATE_DEADLINE_CONTINUE

_CallbackType = _bindings._wasmtime_store_epoch_deadline_callback.argtypes[1]
_FinalizerType = _bindings._wasmtime_store_epoch_deadline_callback.argtypes[3]
_NO_FINALIZER = _FinalizerType()        # a NULL function pointer: nothing to free

# Decides, on the run's thread, whether the run may go on: returns ticks to extend by,
# or None to end it.
Verdict = Callable[[], "int | None"]
_verdicts = threading.local()


@_CallbackType
def _on_deadline(_context, _env, delta, kind):  # type: ignore[no-untyped-def]
    try:
        verdict: Verdict | None = getattr(_verdicts, "current", None)
        ticks = verdict() if verdict is not None else None
    except BaseException:       # never let an exception cross the C boundary
        ticks = None
    if ticks is None:
        error = _bindings.wasmtime_error_new(b"run interrupted by the host")
        return ctypes.cast(error, ctypes.c_void_p).value
    delta[0] = max(1, ticks)
    kind[0] = _CONTINUE
    return 0


def prepare(store: wasmtime.Store) -> None:
    """Give `store` the deadline callback, once, when it is made (off a run's path when it
    is made ahead). Until a run `install`s its verdict on its thread, a deadline that
    passes ends whatever runs (so a Store made ahead runs with a deadline far off)."""
    _bindings.wasmtime_store_epoch_deadline_callback(store.ptr(), _on_deadline, None,
                                                     _NO_FINALIZER)


def install(store: wasmtime.Store, verdict: Verdict) -> None:
    """Check `verdict` every `CHECK_TICKS` ticks while `store` (`prepare`d) runs on this
    thread."""
    _verdicts.current = verdict
    store.set_epoch_deadline(CHECK_TICKS)


def uninstall() -> None:
    _verdicts.current = None
