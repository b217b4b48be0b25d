"""Recording and replaying a run's clock and random reads (docs/sandbox.md, "Recording and
replaying clocks and randomness").

A `TapeRecorder` belongs to one run that was given a `Tape` (`RunRequest.tape`). The wasm
tier's recording linker answers the guest's `wasi:clocks/wall-clock`,
`wasi:clocks/monotonic-clock` and `wasi:random/random` calls through it: each read is taken
from the tape's next entry while entries remain (replay), then live, and every read is
kept for `RunOutcome.tape`.
"""

from __future__ import annotations

import os
import time

from ._host import HostStop
from ._protocol import (
    MonotonicRead,
    OutputLimitExceeded,
    RandomBytes,
    RandomU64,
    ReplayDiverged,
    Tape,
    TapeEntry,
    WallClockRead,
)

MAX_ENTRIES = 100_000
"""The most reads a recording keeps. The run goes on past it, unrecorded from there on
(`Tape.complete` is False): a program that polls the clock in a loop is not a failure."""

MAX_TAPE_BYTES = 1 << 20
"""The most random bytes a recording keeps (bytes, all reads together); past it the run
goes on unrecorded, as past `MAX_ENTRIES`."""

MAX_READ_BYTES = 1 << 20
"""The most random bytes one read of a recorded run may ask for (`os.urandom(n)` is one
read). The host lowers the answer as a list of 32-byte component values, so a larger read
would cost the host 32 times its size in memory; it ends the run (`OutputLimitExceeded`)."""


_U64 = 1 << 64


def describe(entry: TapeEntry) -> str:
    """What a read was, for people: "the wall clock", "16 random bytes", ..."""
    match entry:
        case WallClockRead():
            return "the wall clock"
        case MonotonicRead():
            return "the monotonic clock"
        case RandomBytes(data=data):
            return f"{len(data)} random bytes"
        case RandomU64():
            return "a random 64-bit integer"


def _invalid(entry: TapeEntry) -> str | None:
    """Why `entry` cannot be handed to the guest (a value out of its WASI type), or None."""
    match entry:
        case WallClockRead(seconds=s, nanoseconds=ns):
            if not (0 <= s < _U64 and 0 <= ns < 1_000_000_000):
                return "its seconds must be in 0..2**64-1 and its nanoseconds in 0..999999999"
        case MonotonicRead(nanoseconds=value) | RandomU64(value=value):
            if not 0 <= value < _U64:
                return "its value must be in 0..2**64-1"
        case RandomBytes(data=data):
            if not isinstance(data, bytes):
                return "its data must be bytes"
    return None


class TapeRecorder:
    """One run's clock and random reads: replayed from a tape, then live, all recorded.

    Args:
        tape: the recorded reads to replay first (an empty tape records from the start).

    Attributes:
        replayed: entries of the given tape answered so far.
    """

    def __init__(self, tape: Tape) -> None:
        self._replay = tuple(tape.entries)
        self.replayed = 0
        self._live: list[TapeEntry] = []
        self._origin_ns = time.monotonic_ns()
        self._last_monotonic: int | None = None      # the last replayed monotonic value
        self._stopped = not tape.complete            # a bound stopped the recording
        self._random_bytes = sum(len(e.data) for e in tape.entries
                                 if isinstance(e, RandomBytes))
        self._monotonic_offset: int | None = None    # set at the first live monotonic read

    @property
    def replaying(self) -> bool:
        """True while entries of the given tape remain to be read."""
        return self.replayed < len(self._replay)

    def tape(self) -> Tape:
        """Everything recorded so far: the replayed entries, then the live ones
        (`complete` False once a bound stopped the recording)."""
        return Tape(entries=self._replay[:self.replayed] + tuple(self._live),
                    complete=not self._stopped)

    def _next(self, read: str, kind: type[TapeEntry], nbytes: int = 0) -> TapeEntry | None:
        """The replayed entry answering a read of `kind` (`read` says what it is, for
        people; `nbytes` long for bytes), or None when the tape is used up (the caller then
        reads live and calls `_keep`).

        Raises:
            HostStop: `ReplayDiverged` when the next entry is another kind of read, or
                holds a value out of its WASI type.
        """
        if not self.replaying:
            return None
        index = self.replayed
        entry = self._replay[index]
        if type(entry) is not kind or (
                isinstance(entry, RandomBytes) and len(entry.data) != nbytes):
            raise HostStop(ReplayDiverged(
                message=f"the program read {read} where the recorded run read "
                        f"{describe(entry)} (entry {index})"))
        why = _invalid(entry)
        if why is not None:
            raise HostStop(ReplayDiverged(
                message=f"entry {index} of the tape ({describe(entry)}) cannot be replayed: "
                        f"{why}"))
        self.replayed = index + 1
        return entry

    def _keep(self, entry: TapeEntry) -> None:
        """Record a live read, unless a bound stopped the recording (`MAX_ENTRIES`,
        `MAX_TAPE_BYTES`): from the first read past one, nothing more is kept, so the
        entries stay the run's reads in order, up to that point."""
        if self._stopped:
            return
        size = len(entry.data) if isinstance(entry, RandomBytes) else 0
        if self.replayed + len(self._live) >= MAX_ENTRIES \
                or self._random_bytes + size > MAX_TAPE_BYTES:
            self._stopped = True
            return
        self._random_bytes += size
        self._live.append(entry)

    def wall_clock(self) -> tuple[int, int]:
        """`wasi:clocks/wall-clock.now`: (seconds, nanoseconds) since the Unix epoch."""
        entry = self._next("the wall clock", WallClockRead)
        if isinstance(entry, WallClockRead):
            return entry.seconds, entry.nanoseconds
        seconds, nanoseconds = divmod(time.time_ns(), 1_000_000_000)
        self._keep(WallClockRead(seconds=seconds, nanoseconds=nanoseconds))
        return seconds, nanoseconds

    def monotonic(self) -> int:
        """`wasi:clocks/monotonic-clock.now`: nanoseconds since the run started, never
        below the last replayed value."""
        entry = self._next("the monotonic clock", MonotonicRead)
        if isinstance(entry, MonotonicRead):
            self._last_monotonic = entry.nanoseconds
            return entry.nanoseconds
        now = time.monotonic_ns() - self._origin_ns
        if self._monotonic_offset is None:
            last = self._last_monotonic
            self._monotonic_offset = 0 if last is None else max(0, last - now)
        now += self._monotonic_offset
        self._keep(MonotonicRead(nanoseconds=now))
        return now

    def random_bytes(self, nbytes: int) -> bytes:
        """`wasi:random/random.get-random-bytes`: `nbytes` random bytes.

        Raises:
            HostStop: `ReplayDiverged` (see `_next`), or `OutputLimitExceeded` for a read
                over `MAX_READ_BYTES`.
        """
        if nbytes > MAX_READ_BYTES:
            raise HostStop(OutputLimitExceeded(
                message=f"the program asked for {nbytes} random bytes at once; a run that "
                        f"records its reads for a replay may ask for {MAX_READ_BYTES} at most "
                        "(read them in smaller pieces)"))
        entry = self._next(f"{nbytes} random bytes", RandomBytes, nbytes)
        if isinstance(entry, RandomBytes):
            return entry.data
        data = os.urandom(nbytes)
        self._keep(RandomBytes(data=data))
        return data

    def random_u64(self) -> int:
        """`wasi:random/random.get-random-u64`: a random unsigned 64-bit integer."""
        entry = self._next("a random 64-bit integer", RandomU64)
        if isinstance(entry, RandomU64):
            return entry.value
        value = int.from_bytes(os.urandom(8), "little")
        self._keep(RandomU64(value=value))
        return value
