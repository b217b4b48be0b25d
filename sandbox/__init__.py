"""Runs untrusted Python in a wasmtime sandbox (docs/design.md §3). Imports neither pipeline
nor codemode; calls back through a plain `dispatch(batch: SubCallBatch) -> SubCallReply`."""

from ._component import SandboxUnavailable, cache_dir
from ._limits import SandboxLimits
from ._protocol import (
    Dispatch,
    FuelExhausted,
    GuestCrashed,
    HostDispatchFailed,
    MemoryLimitExceeded,
    MonotonicRead,
    OutputLimitExceeded,
    ParamSpec,
    PauseRun,
    ProgramError,
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
from ._restricted import RestrictedSandbox
from ._values import decode_value
from ._wasm import WasmSandbox
from ._worker_host import RestrictedProcessSandbox, WorkerPool
from .guest.cm_guest.modules import AVAILABLE as AVAILABLE_MODULES

__all__ = [
    "AVAILABLE_MODULES", "Dispatch", "FuelExhausted", "GuestCrashed", "HostDispatchFailed",
    "MemoryLimitExceeded", "MonotonicRead", "OutputLimitExceeded", "ParamSpec", "PauseRun",
    "ProgramError", "RandomBytes", "RandomU64", "ReplayDiverged", "RestrictedProcessSandbox",
    "RestrictedSandbox", "RunAborted", "RunError", "RunOutcome", "RunPaused", "RunRequest",
    "Sandbox", "SandboxLimits", "SandboxUnavailable", "SubCall", "SubCallBatch", "SubCallErr",
    "SubCallOk", "SubCallOutcome", "SubCallReply", "SubcallLimitExceeded", "Tape", "TapeEntry",
    "TimeLimitExceeded", "ToolSpec", "WallClockRead", "WasmSandbox", "WorkerPool", "cache_dir",
    "decode_value",
]
