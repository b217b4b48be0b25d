"""The runner's contract: request, outcome, the dispatch callback, the Sandbox protocol."""

import threading
from collections.abc import Callable
from typing import Any, ClassVar, Literal, Protocol

import msgspec
from msgspec import UNSET, UnsetType

from ._limits import SandboxLimits

Dispatch = Callable[[str], str]
"""Called on the runner's thread with one sub-call batch (JSON text, see `sandbox/wire`)
and returns the reply (JSON text). Failed calls are data in the reply; it never raises
for them."""


class ParamSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One parameter of a tool binding, in signature order."""

    name: str
    required: bool = False
    default: Any | UnsetType = UNSET
    omit_if_none: bool = False      # an explicit None means "not given": left out of the call


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool as the guest sees it: the name dispatched, the Python alias the program
    calls, the parameters it checks call shapes against, its docstring."""

    name: str
    alias: str
    params: tuple[ParamSpec, ...] = ()
    accepts_extra: bool = True
    doc: str = ""


class RunRequest(msgspec.Struct, frozen=True, kw_only=True):
    code: str
    tools: tuple[ToolSpec, ...] = ()
    limits: SandboxLimits = SandboxLimits()


# ---- how a run ended -----------------------------------------------------------------

class RunError(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    """Why a run did not complete. `kind` is stable; `message` is for people."""

    message: str
    limit: ClassVar[bool] = False

    @property
    def kind(self) -> str:
        """The stable kind: "exception", "timeout", "fuel", "memory", "output", ..."""
        return str(type(self).__struct_config__.tag)


class ProgramError(RunError, tag="exception", frozen=True):
    """The program raised (SyntaxError and SystemExit included). `traceback` shows only
    the program's own lines."""

    type: str
    traceback: str = ""


class TimeLimitExceeded(RunError, tag="timeout", frozen=True):
    limit: ClassVar[bool] = True


class FuelExhausted(RunError, tag="fuel", frozen=True):
    limit: ClassVar[bool] = True


class MemoryLimitExceeded(RunError, tag="memory", frozen=True):
    limit: ClassVar[bool] = True


class OutputLimitExceeded(RunError, tag="output", frozen=True):
    limit: ClassVar[bool] = True


class SubcallLimitExceeded(RunError, tag="subcalls", frozen=True):
    limit: ClassVar[bool] = True


class RunAborted(RunError, tag="abort", frozen=True):
    """The caller cancelled the run."""


class GuestCrashed(RunError, tag="trap", frozen=True):
    """The instance trapped for a reason no limit explains (a runtime fault)."""


class HostDispatchFailed(RunError, tag="dispatch", frozen=True):
    """The host's dispatch callback raised or answered malformed data."""


AnyRunError = (ProgramError | TimeLimitExceeded | FuelExhausted | MemoryLimitExceeded
               | OutputLimitExceeded | SubcallLimitExceeded | RunAborted | GuestCrashed
               | HostDispatchFailed)


class RunOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How one run ended (docs/design.md §3 guest contract).

    Attributes:
        status: "ok", "error" (the program failed) or "limit" (a limit ended it).
        stdout, stderr: captured text, each cut to `limits.output_bytes` with a marker;
            kept however the run ended (a limit, a trap, a cancellation).
        value: the final expression statement's value as JSON, in the lossless encoding of
            docs/sandbox.md ("The value": a tagged object such as `{"$tuple": [...]}` for
            what plain JSON would lose; `decode_value` turns it back into Python objects);
            None when it evaluated to None; UNSET when the program did not end with an
            expression statement.
            Its JSON is at most `limits.output_bytes`: a larger value ends the run at the
            output limit.
        error: why the run did not complete (None when status is "ok").
        duration_s: wall-clock seconds of the guest call.
        subcalls: sub-calls the program sent.
        fuel_used: fuel consumed, when fuel was metered.
    """

    status: Literal["ok", "error", "limit"]
    stdout: str = ""
    stderr: str = ""
    value: Any | UnsetType = UNSET
    error: AnyRunError | None = None
    duration_s: float = 0.0
    subcalls: int = 0
    fuel_used: int | None = None


class Sandbox(Protocol):
    """WasmSandbox, RestrictedSandbox: one program per call, a fresh state per run.
    Setting `cancel` (from any thread) ends the run as `RunAborted`."""

    @property
    def allowed_modules(self) -> frozenset[str]:
        """The dotted names of the modules a program may import (any other import raises
        `ModuleNotFoundError`). Known without running a program."""
        ...

    def run(self, request: RunRequest, dispatch: Dispatch,
            cancel: threading.Event | None = None) -> RunOutcome: ...
