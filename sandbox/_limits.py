"""Sandbox limits, every field with its unit (docs/design.md §3)."""

from typing import Annotated

import msgspec
from msgspec import Meta

MiB = 1 << 20
MAX_CODE_BYTES = 64 * MiB
"""The most `SandboxLimits.code_bytes` may allow, in bytes (what a program source may be)."""


class SandboxLimits(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What one run may use. Build from config with `msgspec.convert(data, SandboxLimits)`,
    which checks the constraints (the constructor does not).

    Attributes:
        wall_clock_s: seconds of wall-clock time (at most a day), enforced with epoch
            interruption from a
            process-wide ticker and also bounding time spent in host calls (sub-calls,
            sleep). The default bound.
        fuel: wasm fuel units (roughly instructions) or None for no fuel metering. Fuel
            gives deterministic budgets but runs ~20% slower, so it is off by default.
        memory_bytes: linear memory of the instance, in bytes (store limits); at most
            4 GiB, all a wasm32 instance can address.
        stack_bytes: wasm stack, in bytes (`Config.max_wasm_stack`, the native stack the
            compiled guest runs on; host memory, touched only as deep as the program
            recurses); at most 128 MiB (the runner's threads have 256 MiB). CPython's own
            check for deep C recursion measures the guest's other stack, in linear memory,
            and fires at about 1 MiB of it; the deepest native use that check allows
            (comparing two self-containing lists) is ~26 MiB, so the 64 MiB default turns
            every such recursion into a catchable RecursionError. Freeing a structure nested
            more than ~250,000 levels deep has no such check and traps (`GuestCrashed`).
        output_bytes: what the outcome keeps of stdout, of stderr and of the final value's
            JSON, each, in bytes. Past it the stream is cut with a marker, the value cut to
            fit (`$cut` markers), and the run goes on: `RunOutcome.cut` says what was cut
            and `RunOutcome.full` holds the whole (up to `full_output_bytes`).
        full_output_bytes: the most the host keeps of each stream and of the value's JSON,
            whole, in bytes (the memory a program's output can take on the host: about
            three times this per run). Past it the run ends with `OutputLimitExceeded`:
            the stream is cut there with a marker, a larger value is left out. Never less
            than `output_bytes` (`output_cap_bytes`).
        max_subcalls: tool sub-calls per run; the next one ends the run
            (`SubcallLimitExceeded`).
        max_concurrent_subcalls: sub-calls of one batch run at the same time on the host.
        request_bytes: JSON bytes of one sub-call's arguments (refused in the guest; the
            host refuses a batch over `request_bytes * 4` before decoding, and a call over
            `request_bytes` after, ending the run with `HostDispatchFailed`).
        result_bytes: JSON bytes of the run's whole result (value, error); the guest
            enforces it and `output_cap_bytes`, and the host checks both again.
        code_bytes: UTF-8 bytes of the program's source; a larger program is refused
            before anything runs (`ProgramTooLarge`). A model's program is a few KiB; the
            default leaves room for data written into the source, and keeps the guest's
            decoding and compiling of it well inside the default `memory_bytes` (a program
            near the instance's own memory traps instead: `GuestCrashed`).
    """

    wall_clock_s: Annotated[float, Meta(gt=0, le=86_400)] = 10.0
    fuel: Annotated[int, Meta(gt=0, le=2**63 - 1)] | None = None
    memory_bytes: Annotated[int, Meta(ge=16 * MiB, le=4096 * MiB)] = 256 * MiB
    stack_bytes: Annotated[int, Meta(ge=256 * 1024, le=128 * MiB)] = 64 * MiB
    output_bytes: Annotated[int, Meta(gt=0)] = 1 * MiB
    full_output_bytes: Annotated[int, Meta(gt=0)] = 16 * MiB
    max_subcalls: Annotated[int, Meta(ge=0)] = 1000
    max_concurrent_subcalls: Annotated[int, Meta(gt=0)] = 10
    request_bytes: Annotated[int, Meta(gt=0)] = 16 * MiB
    result_bytes: Annotated[int, Meta(gt=0)] = 64 * MiB
    code_bytes: Annotated[int, Meta(gt=0, le=MAX_CODE_BYTES)] = 1 * MiB

    @property
    def output_cap_bytes(self) -> int:
        """Bytes of each stream and of the value's JSON past which the run ends: the larger
        of `full_output_bytes` and `output_bytes`."""
        return max(self.full_output_bytes, self.output_bytes)

    def for_guest(self) -> dict[str, int]:
        """The limits the guest enforces itself, as sent in the run request (its
        `output_bytes` is the hard cap: the cut to `output_bytes` is the host's)."""
        return {
            "memory_bytes": self.memory_bytes,      # named in the guest's memory error
            "output_bytes": self.output_cap_bytes,
            "max_subcalls": self.max_subcalls,
            "request_bytes": self.request_bytes,
            "result_bytes": self.result_bytes,
        }
