"""The host's side of one run, written once for both tiers (`WasmSandbox`,
`RestrictedSandbox`): the limits checked at every host call, the sub-call and sleep
services the guest calls, the captured output, and the guest's outcome decoded into a
`RunOutcome`.

The guest's outcome (`guest/cm_guest/runtime.py`) is JSON tagged by `status`:

    {"status": "ok", "value"?: <lossless JSON>}
    {"status": "error", "error": {"type", "message", "traceback"}}
    {"status": "limit", "limit": <a RunError kind>, "error": {"message", ...}}

and decodes into `GuestOk | GuestFailed | GuestLimited`. A limit has one name everywhere:
the `kind` of its `RunError` class ("timeout", "fuel", "memory", "output", "subcalls",
"abort", "dispatch", "paused").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from . import _wire
from ._capture import OnOutput, OutputCapture, OutputTap
from ._cut import cut_value
from ._limits import SandboxLimits
from ._protocol import (
    AnyRunError,
    Dispatch,
    FuelExhausted,
    FullOutput,
    GuestCrashed,
    HostDispatchFailed,
    MemoryLimitExceeded,
    OutputCut,
    OutputLimitExceeded,
    PauseRun,
    ProgramError,
    ProgramTooLarge,
    RunAborted,
    RunOutcome,
    RunPaused,
    SubCall,
    SubCallBatch,
    SubcallLimitExceeded,
    TimeLimitExceeded,
)

if TYPE_CHECKING:
    from ._tape import TapeRecorder

LimitName = Literal["timeout", "fuel", "memory", "output", "subcalls", "abort", "dispatch",
                    "paused"]

LIMIT_ERRORS: dict[str, Callable[..., AnyRunError]] = {
    str(cls.__struct_config__.tag): cls
    for cls in (TimeLimitExceeded, FuelExhausted, MemoryLimitExceeded, OutputLimitExceeded,
                SubcallLimitExceeded, RunAborted, HostDispatchFailed, RunPaused)}
"""The error for each limit name the guest or a tier reports (a "limit" to the guest is
anything that ends the run whatever the program does: `RunPaused` too)."""


# ---- the guest's outcome ---------------------------------------------------------------

class GuestError(msgspec.Struct, frozen=True):
    message: str = ""
    type: str = "RuntimeError"
    traceback: str = ""


class GuestOk(msgspec.Struct, frozen=True, tag_field="status", tag="ok"):
    """`value`: the final value's JSON as the guest wrote it (its size is checked, and it
    is decoded, by `outcome`)."""

    value: msgspec.Raw | UnsetType = UNSET


class GuestFailed(msgspec.Struct, frozen=True, tag_field="status", tag="error"):
    error: GuestError


class GuestLimited(msgspec.Struct, frozen=True, tag_field="status", tag="limit"):
    limit: LimitName
    error: GuestError = GuestError()


GuestOutcome = GuestOk | GuestFailed | GuestLimited
_guest_decoder = msgspec.json.Decoder(GuestOutcome)
_decode_arguments = _decode_value = msgspec.json.Decoder().decode


def decode_guest(text: str) -> GuestOutcome | AnyRunError:
    """The guest's outcome, or `GuestCrashed` when it is not one (a program that tampered
    with the runtime can make it say anything)."""
    try:
        return _guest_decoder.decode(text)
    except (msgspec.DecodeError, RecursionError) as exc:
        return GuestCrashed(message=f"the sandbox returned a malformed outcome: {exc}")


# ---- one run's host state ----------------------------------------------------------------

class HostStop(Exception):
    """Raised by a host service to end the run with `error` (the wasm tier lets it trap
    the instance; the restricted tier raises it into the program as a limit)."""

    def __init__(self, error: AnyRunError) -> None:
        super().__init__(error.message)
        self.error = error


class RunHost:
    """What the host knows and enforces about one run, whatever the tier.

    Attributes:
        limits: the run's limits.
        cancel: set from any thread to end the run (`RunAborted`).
        deadline: `time.monotonic()` past which the run is out of time.
        subcalls: sub-calls the program sent so far.
        stdout, stderr: the output captured as the program wrote it (each up to
            `limits.output_cap_bytes`), handed to `on_output` as it arrives.
        tape: the run's clock and random reads, when they are recorded (the wasm tier
            sets it for a request with a tape); None otherwise.
    """

    tape: TapeRecorder | None = None

    def __init__(self, limits: SandboxLimits, dispatch: Dispatch,
                 cancel: threading.Event | None, on_output: OnOutput | None = None) -> None:
        self.limits = limits
        self.dispatch = dispatch
        self.cancel = cancel or threading.Event()
        self.started = time.monotonic()
        self.deadline = self.started + limits.wall_clock_s
        self.subcalls = 0
        self.stdout, self.stderr = (
            OutputCapture(name, limits.output_bytes, limits.output_cap_bytes,
                          None if on_output is None else OutputTap(name, on_output))
            for name in ("stdout", "stderr"))

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def time_up(self) -> TimeLimitExceeded:
        return TimeLimitExceeded(
            message=f"the run exceeded its wall-clock limit of {self.limits.wall_clock_s} s")

    def stop_reason(self) -> AnyRunError | None:
        """Why the run must end now (cancelled, out of time, output past its limit)."""
        if self.cancel.is_set():
            return RunAborted(message="the run was cancelled")
        if self.remaining_s() <= 0:
            return self.time_up()
        for capture in (self.stdout, self.stderr):
            if capture.over:
                return OutputLimitExceeded(
                    message=f"{capture.name} exceeded {self.limits.output_cap_bytes} bytes")
        return None

    def check(self) -> None:
        """Raises:
            HostStop: the run must end (see `stop_reason`)."""
        # The common case (nothing to stop) without building a reason: this runs twice per
        # sub-call batch. Every condition tested stays true once true, so `stop_reason`
        # finds one.
        if (self.cancel.is_set() or time.monotonic() >= self.deadline
                or self.stdout.over or self.stderr.over):
            reason = self.stop_reason()
            if reason is not None:
                raise HostStop(reason)

    def dispatch_batch(self, batch: str) -> str:
        """One sub-call batch from the guest (`sandbox._wire`): decoded and checked once
        (its size, each call's arguments: size, JSON the host decodes), counted against
        `max_subcalls`, its wait bounded by the deadline, handed to the dispatcher as a
        `SubCallBatch`, and the dispatcher's `SubCallReply` encoded for the guest.

        Raises:
            HostStop: a limit, a cancellation, a malformed batch or reply, a dispatcher
                that raised, or one that raised `PauseRun` (`RunPaused`).
        """
        self.check()
        limits = self.limits
        max_bytes = limits.request_bytes
        if len(batch) > max_bytes * 4:
            raise HostStop(HostDispatchFailed(
                message=f"a sub-call batch of {len(batch)} bytes exceeds the host's limit"))
        try:
            request = _wire.request_decoder.decode(batch)
            calls = []
            for call in request.calls:  # the guest checks these too; a program can bypass it
                args = call.args
                if len(args) > max_bytes:
                    raise HostStop(HostDispatchFailed(
                        message=f"the arguments of sub-call {call.id} are {len(args)} "
                                f"bytes of JSON, over the limit of {max_bytes} bytes"))
                calls.append(SubCall(id=call.id, name=call.name, args=args,
                                     arguments=_decode_arguments(args), invalid=call.invalid))
        except (msgspec.DecodeError, RecursionError) as exc:
            raise HostStop(HostDispatchFailed(
                message=f"malformed sub-call batch: {exc}")) from None
        self.subcalls += len(calls)
        if self.subcalls > limits.max_subcalls:
            raise HostStop(SubcallLimitExceeded(
                message=f"the program made more than {limits.max_subcalls} sub-calls"))
        remaining = max(self.deadline - time.monotonic(), 0.0)
        wait_s, until = request.wait_s, request.until
        bounded = SubCallBatch(calls=tuple(calls), cancel=tuple(request.cancel),
                               wait_s=remaining if wait_s is None
                               else min(max(wait_s, 0.0), remaining),
                               until=None if until is None else tuple(until),
                               indefinite=wait_s is None)
        try:
            answered = self.dispatch(bounded)
        except HostStop:
            raise
        except PauseRun as exc:
            raise HostStop(RunPaused(message=exc.message)) from None
        except Exception as exc:
            raise HostStop(HostDispatchFailed(
                message=f"the dispatcher raised {type(exc).__name__}: {exc}")) from exc
        try:                    # the only check of the reply: that it encodes for the guest
            reply = _wire.encode_reply(answered)
        except (TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise HostStop(HostDispatchFailed(
                message=f"the dispatcher's reply is malformed: {exc}")) from None
        self.check()
        return reply

    def sleep(self, seconds: float) -> None:
        """`time.sleep` and an idle event loop: bounded by the deadline, woken by cancel.
        While a tape is replayed (`tape.replaying`) it returns at once: the replayed
        clocks show the program the time it saw when the tape was recorded.

        Raises:
            ValueError: `seconds` is negative or NaN.
            HostStop: the run was cancelled or runs out of time while sleeping.
        """
        seconds = float(seconds)
        if seconds != seconds or seconds < 0:
            raise ValueError("sleep length must be non-negative")
        self.check()
        if self.tape is not None and self.tape.replaying:
            return
        remaining = self.remaining_s()
        if seconds >= remaining:
            self.cancel.wait(max(remaining, 0.0))
            self.check()
            raise HostStop(self.time_up())
        if self.cancel.wait(seconds):
            self.check()


# ---- the outcome -------------------------------------------------------------------------

def refused_as_too_large(code: str, limits: SandboxLimits) -> RunOutcome | None:
    """The outcome of a program whose source is over `limits.code_bytes` UTF-8 bytes
    (`ProgramTooLarge`, nothing run), else None. Every tier asks before it starts a run."""
    limit = limits.code_bytes
    if len(code) * 4 <= limit:           # (at most 4 bytes a character: no encoding needed)
        return None
    size = len(code.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return None
    return RunOutcome(status="limit", error=ProgramTooLarge(
        message=f"the program is {size} bytes, over its limit of {limit} bytes (code_bytes)"))


def outcome(host: RunHost, ended: GuestOutcome | AnyRunError, *, duration_s: float,
            fuel_used: int | None = None) -> RunOutcome:
    """The `RunOutcome` of a run that ended as `ended` (the guest's own outcome, or the
    error the host ended it with), with everything the program wrote: each stream and the
    value cut to `output_bytes` (what was cut in `cut`, whole in `full`). A stream written
    past its cap, or a value over it, ends the run at the output limit unless another
    limit came first. The captures end here: the `on_output` callback has had everything."""
    for capture in (host.stdout, host.stderr):
        capture.end()
    raw: msgspec.Raw | UnsetType = UNSET
    error: AnyRunError | None
    match ended:
        case GuestOk(value=raw):
            error = None
        case GuestFailed(error=failed):
            error = ProgramError(type=failed.type, message=failed.message,
                                 traceback=failed.traceback)
        case GuestLimited(limit=limit, error=failed):
            error = LIMIT_ERRORS[limit](message=failed.message or limit)
        case _:
            error = ended
    limits = host.limits
    if raw is not UNSET and len(raw) > limits.output_cap_bytes and error is None:
        error = OutputLimitExceeded(
            message=f"the final value is more than {limits.output_cap_bytes} bytes of "
                    f"JSON, over the output limit of {limits.output_cap_bytes} bytes")
    if error is None or not error.limit:
        reason = host.stop_reason()
        if isinstance(reason, OutputLimitExceeded):
            error = reason
    value: Any = UNSET
    texts: dict[str, str] = {}
    cut: list[OutputCut] = []
    full: dict[str, Any] = {}
    streams: tuple[tuple[Literal["stdout", "stderr"], OutputCapture], ...] = (
        ("stdout", host.stdout), ("stderr", host.stderr))
    for part, capture in streams:
        texts[part], whole = capture.texts()
        if whole is not None:
            full[part] = whole
            cut.append(OutputCut(part=part, kept_bytes=capture.limit_bytes,
                                 total_bytes=capture.total_bytes))
    if error is None and raw is not UNSET:
        try:
            value = _decode_value(raw)
        except (msgspec.DecodeError, RecursionError) as exc:
            value, error = UNSET, GuestCrashed(message=f"the sandbox returned a malformed "
                                                       f"value: {exc}")
    if error is None and raw is not UNSET and len(raw) > limits.output_bytes:
        full["value"], value = value, cut_value(value, limits.output_bytes)
        cut.append(OutputCut(part="value", kept_bytes=limits.output_bytes,
                             total_bytes=len(raw)))
    status: Literal["ok", "error", "limit", "paused"] = (
        "ok" if error is None else "limit" if error.limit
        else "paused" if isinstance(error, RunPaused) else "error")
    return RunOutcome(status=status, stdout=texts["stdout"], stderr=texts["stderr"],
                      value=value, error=error, duration_s=duration_s,
                      subcalls=host.subcalls, fuel_used=fuel_used,
                      tape=None if host.tape is None else host.tape.tape(),
                      cut=tuple(cut), full=FullOutput(**full) if full else None)
