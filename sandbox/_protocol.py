"""The runner's contract: request, outcome, the dispatch callback, the Sandbox protocol."""

import threading
from collections.abc import Callable
from typing import Any, ClassVar, Literal, Protocol

import msgspec
from msgspec import UNSET, UnsetType

from ._limits import SandboxLimits


class SubCall(msgspec.Struct, frozen=True, kw_only=True):
    """One call a program sent, as the host decoded and checked it (once: the dispatcher
    never decodes it again).

    Attributes:
        id: the program's id for the call (unique within the run only if the program
            keeps it so: a dispatcher refuses a reused one).
        name: the tool name called (any string: the host decides which names exist).
        args: the arguments as the program encoded them (JSON text, within
            `limits.request_bytes`), for records that must compare exact text.
        arguments: the same, decoded (plain dicts, lists, str, int, float, bool, None);
            integers within 64 bits, nesting the host can decode.
        invalid: why the program found the call did not fit the tool's signature (its
            Python `TypeError` text), when it did: the call is recorded and refused
            `INVALID_ARGS`.
    """

    id: int
    name: str
    args: msgspec.Raw
    arguments: Any = None
    invalid: str | None = None


class SubCallBatch(msgspec.Struct, frozen=True, kw_only=True):
    """One batch from the program: start `calls` in order, abort `cancel`, and answer once
    one call of `until` (None: any call in flight) settled, or `wait_s` passed.

    Attributes:
        wait_s: seconds to wait at most, bounded by the run's deadline (0: answer now).
        indefinite: the program gave no timer of its own (its `wait_s` was null), so only
            a settled call can wake it: a dispatcher may pause such a run (`PauseRun`) when
            nothing it waits for can settle.
    """

    calls: tuple[SubCall, ...] = ()
    cancel: tuple[int, ...] = ()
    wait_s: float = 0.0
    until: tuple[int, ...] | None = None
    indefinite: bool = False


class SubCallOk(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="ok"):
    """A call that succeeded: `value` is its JSON value."""

    id: int
    value: Any = None


class SubCallErr(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="error"):
    """A call that failed: `code` is its stable rejection code (`DENIED`, `TOOL_ERROR`,
    ...), raised in the program as the matching `ToolCallError`; `message` is for people.
    `ran`: the tool's body ran (or its server answered) before the call failed, so the
    message may hold the tool's data, whatever the code; False for a call refused before
    its body (and in records written before the field existed)."""

    id: int
    code: str
    message: str
    ran: bool = False


SubCallOutcome = SubCallOk | SubCallErr
"""How one sub-call settled."""


class SubCallReply(msgspec.Struct, frozen=True):
    """The answer to a batch: each call that settled since the previous answer, once."""

    results: tuple[SubCallOutcome, ...] = ()


Dispatch = Callable[[SubCallBatch], SubCallReply]
"""Called on the runner's thread with one sub-call batch; returns the reply. Failed calls
are data in the reply (`SubCallErr`); it never raises for them. A reply whose values are
not JSON ends the run (`HostDispatchFailed`)."""


class ParamSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One parameter of a tool binding, in signature order."""

    name: str
    required: bool = False
    default: Any | UnsetType = UNSET
    omit_if_none: bool = False      # an explicit None means "not given": left out of the call
    keyword_only: bool = False      # a name that cannot be written positionally ("from")


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool as the guest sees it: the name dispatched, the Python alias the program
    calls, the parameters it checks call shapes against (Python's own rules: a keyword
    beyond `params` is refused unless `accepts_extra`), its docstring, and `signature`,
    the stub's `def` line (`def f(a: int, b: str = "x") -> R:`) that `inspect.signature`
    and `help` show inside the program ("": made from `params`, without types)."""

    name: str
    alias: str
    params: tuple[ParamSpec, ...] = ()
    accepts_extra: bool = True
    doc: str = ""
    signature: str = ""


class PauseRun(Exception):
    """Raised by a `Dispatch` callback to stop the run at this sub-call batch, for
    example to ask a person for approval. The batch is not carried out; the run ends at
    once with status "paused" and `RunPaused(message=message)`, keeping what the program
    printed before. The program cannot catch it. A paused run is resumed by running the
    program again (with the run's `tape`, to replay its clocks and randomness).

    Args:
        message: why the run paused (for people), copied to `RunPaused.message`.
    """

    def __init__(self, message: str = "the run was paused") -> None:
        super().__init__(message)
        self.message = message


# ---- recording and replaying clocks and randomness ------------------------------------

class _TapeEntry(msgspec.Struct, frozen=True, tag_field="kind"):
    """One read of a clock or of randomness by a run (`Tape`)."""


class WallClockRead(_TapeEntry, frozen=True, tag="wall"):
    """The wall clock (`time.time`, `datetime.now`, `time.localtime`): seconds and
    nanoseconds since the Unix epoch (UTC)."""

    seconds: int
    nanoseconds: int


class MonotonicRead(_TapeEntry, frozen=True, tag="monotonic"):
    """The monotonic clock (`time.monotonic`, `time.perf_counter`, asyncio's loop), in
    nanoseconds from an arbitrary origin."""

    nanoseconds: int


class RandomBytes(_TapeEntry, frozen=True, tag="bytes"):
    """Random bytes (`os.urandom`, `secrets`, `uuid.uuid4`, the seed of `random`)."""

    data: bytes


class RandomU64(_TapeEntry, frozen=True, tag="u64"):
    """A random unsigned 64-bit integer."""

    value: int


TapeEntry = WallClockRead | MonotonicRead | RandomBytes | RandomU64


class Tape(msgspec.Struct, frozen=True):
    """Every clock and random read of a run, in the order the program made them
    (docs/sandbox.md, "Recording and replaying"). JSON- and msgpack-encodable with msgspec
    (`RandomBytes.data` is base64 in JSON); each entry is tagged by `kind`.

    `complete` is False when the run read more than a recording keeps (`_tape.MAX_ENTRIES`
    reads, `_tape.MAX_TAPE_BYTES` random bytes): the entries are then the reads up to that
    point, and a replay reads live past them."""

    entries: tuple[TapeEntry, ...] = ()
    complete: bool = True


class RunRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One program to run.

    Attributes:
        code: the program's source text.
        tools: the tools the program may call, as it sees them.
        limits: the run's limits.
        tape: None (the default) records nothing. A `Tape` (possibly empty) makes the
            wasm tier answer the program's clock and random reads from its entries, in
            order, then, once they are used up, live, and return everything read in
            `RunOutcome.tape`. The restricted tier ignores it.
    """

    code: str
    tools: tuple[ToolSpec, ...] = ()
    limits: SandboxLimits = SandboxLimits()
    tape: Tape | None = None


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


class ProgramTooLarge(RunError, tag="size", frozen=True):
    """The program's source is larger than `limits.code_bytes`: refused before it ran."""

    limit: ClassVar[bool] = True


class RunAborted(RunError, tag="abort", frozen=True):
    """The caller cancelled the run."""


class GuestCrashed(RunError, tag="trap", frozen=True):
    """The instance trapped for a reason no limit explains (a runtime fault)."""


class HostDispatchFailed(RunError, tag="dispatch", frozen=True):
    """The host's dispatch callback raised or answered malformed data, or the program
    called a host import with data the host refuses (a batch that does not decode, a
    negative or NaN sleep)."""


class RunPaused(RunError, tag="paused", frozen=True):
    """The dispatch callback raised `PauseRun`: the run stopped at a sub-call batch,
    which was not carried out."""


class ReplayDiverged(RunError, tag="replay-diverged", frozen=True):
    """A replayed run (`RunRequest.tape`) read something other than the recorded run
    did at the same point: another clock, or another number of random bytes. The message
    names both and the entry's index."""


AnyRunError = (ProgramError | TimeLimitExceeded | FuelExhausted | MemoryLimitExceeded
               | OutputLimitExceeded | SubcallLimitExceeded | ProgramTooLarge | RunAborted
               | GuestCrashed | HostDispatchFailed | RunPaused | ReplayDiverged)


class OutputCut(msgspec.Struct, frozen=True, kw_only=True):
    """One part of a run's output the outcome keeps only the start of.

    Attributes:
        part: "stdout", "stderr" or "value" (the final value's JSON).
        kept_bytes: what the outcome keeps of it, in bytes (`limits.output_bytes`).
        total_bytes: its whole size in bytes (UTF-8; for the value, of its JSON); when it
            went past `limits.output_cap_bytes` (the run then ended with
            `OutputLimitExceeded`), that cap.
    """

    part: Literal["stdout", "stderr", "value"]
    kept_bytes: int
    total_bytes: int


class FullOutput(msgspec.Struct, frozen=True, kw_only=True):
    """The whole of each part of a run's output that `RunOutcome` cut (`RunOutcome.cut`),
    each at most `limits.output_cap_bytes`; a part that was not cut is None (or UNSET for
    the value): the outcome's own is whole.

    Attributes:
        stdout, stderr: the whole text; a stream the program wrote past the cap ends with
            the marker `[... stdout truncated at N bytes]`.
        value: the whole final value, in the encoding of `RunOutcome.value`.
    """

    stdout: str | None = None
    stderr: str | None = None
    value: Any | UnsetType = UNSET


class RunOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How one run ended (docs/design.md §3 guest contract).

    Attributes:
        status: "ok", "error" (the program failed, or the sandbox could not run it),
            "limit" (a limit ended it) or "paused" (the dispatch callback raised
            `PauseRun`; `error` is `RunPaused`).
        stdout, stderr: captured text, each cut to `limits.output_bytes` with the marker
            `[... stdout truncated at N bytes of M]` (`cut` says so, `full` has the
            whole); kept however the run ended (a limit, a trap, a cancellation).
        value: the final expression statement's value as JSON, in the lossless encoding of
            docs/sandbox.md ("The value": a tagged object such as `{"$tuple": [...]}` for
            what plain JSON would lose; `decode_value` turns it back into Python objects);
            None when it evaluated to None; UNSET when the program did not end with an
            expression statement. Its JSON is at most about `limits.output_bytes`: a
            larger value is cut to fit (docs/sandbox.md, "A value over its limit"; `cut`
            says so, `full.value` is the whole); one over `limits.output_cap_bytes` ends
            the run at the output limit and is left out.
        error: why the run did not complete (None when status is "ok").
        duration_s: wall-clock seconds of the guest call.
        subcalls: sub-calls the program sent.
        fuel_used: fuel consumed, when fuel was metered.
        tape: when the request had a tape (wasm tier only): every clock and random read of
            the run, the replayed entries followed by the live ones, however the run ended
            (a replay that diverged keeps the entries read before it); else None.
        cut: what of `stdout`, `stderr` and `value` was cut to `limits.output_bytes`, in
            that order; empty when nothing was. Cutting never fails a run.
        full: the whole of what was cut (None when nothing was).
    """

    status: Literal["ok", "error", "limit", "paused"]
    stdout: str = ""
    stderr: str = ""
    value: Any | UnsetType = UNSET
    error: AnyRunError | None = None
    duration_s: float = 0.0
    subcalls: int = 0
    fuel_used: int | None = None
    tape: Tape | None = None
    cut: tuple[OutputCut, ...] = ()
    full: FullOutput | None = None


class Sandbox(Protocol):
    """WasmSandbox, RestrictedSandbox: one program per call, a fresh state per run.
    Setting `cancel` (from any thread) ends the run as `RunAborted`. The sandboxes of this
    package also take `on_output` (an `OnOutput` callback: the output as it is written);
    a caller passes it only when it has one, so a sandbox without it still fits."""

    @property
    def allowed_modules(self) -> frozenset[str]:
        """The dotted names of the modules a program may import (any other import raises
        `ModuleNotFoundError`). Known without running a program."""
        ...

    def run(self, request: RunRequest, dispatch: Dispatch,
            cancel: threading.Event | None = None) -> RunOutcome: ...
