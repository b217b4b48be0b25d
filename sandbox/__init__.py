"""Runs untrusted Python in a wasmtime sandbox (docs/design.md §3). Imports neither pipeline
nor codemode; calls back through a plain `dispatch(batch: SubCallBatch) -> SubCallReply`.

The restricted tier (`RestrictedSandbox`, `RestrictedProcessSandbox`, `WorkerPool`) loads on
first use (PEP 562), so a process that only runs the wasm tier never imports RestrictedPython.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._cache import cache_dir
from ._capture import OnOutput
from ._component import SandboxUnavailable
from ._limits import SandboxLimits
from ._protocol import (
    Dispatch,
    FuelExhausted,
    FullOutput,
    GuestCrashed,
    HostDispatchFailed,
    MemoryLimitExceeded,
    MonotonicRead,
    OutputCut,
    OutputLimitExceeded,
    ParamSpec,
    PauseRun,
    ProgramError,
    ProgramTooLarge,
    RandomBytes,
    RandomU64,
    ReplayDiverged,
    RunAborted,
    RunError,
    RunOutcome,
    RunPaused,
    RunRequest,
    Sandbox,
    SubCall,
    SubCallBatch,
    SubCallErr,
    SubcallLimitExceeded,
    SubCallOk,
    SubCallOutcome,
    SubCallReply,
    Tape,
    TapeEntry,
    TimeLimitExceeded,
    ToolSpec,
    WallClockRead,
)
from ._values import decode_value
from ._wasm import WasmSandbox
from .guest.cm_guest.modules import AVAILABLE as AVAILABLE_MODULES

if TYPE_CHECKING:  # `X as X`: re-exported for type checkers, which do not run __getattr__
    from ._restricted import RestrictedSandbox as RestrictedSandbox
    from ._worker_host import RestrictedProcessSandbox as RestrictedProcessSandbox
    from ._worker_host import WorkerPool as WorkerPool

# name -> the private module that defines it
_LAZY = {"RestrictedSandbox": "._restricted", "RestrictedProcessSandbox": "._worker_host",
         "WorkerPool": "._worker_host"}

__all__ = [
    "AVAILABLE_MODULES", "Dispatch", "FuelExhausted", "FullOutput", "GuestCrashed",
    "HostDispatchFailed", "MemoryLimitExceeded", "MonotonicRead", "OnOutput", "OutputCut",
    "OutputLimitExceeded", "ParamSpec", "PauseRun",
    "ProgramError", "ProgramTooLarge", "RandomBytes", "RandomU64", "ReplayDiverged",
    "RestrictedProcessSandbox", "RestrictedSandbox", "RunAborted", "RunError", "RunOutcome",
    "RunPaused", "RunRequest", "Sandbox", "SandboxLimits", "SandboxUnavailable", "SubCall",
    "SubCallBatch", "SubCallErr", "SubCallOk", "SubCallOutcome", "SubCallReply",
    "SubcallLimitExceeded", "Tape", "TapeEntry", "TimeLimitExceeded", "ToolSpec", "WallClockRead",
    "WasmSandbox", "WorkerPool", "cache_dir", "decode_value",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value         # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
