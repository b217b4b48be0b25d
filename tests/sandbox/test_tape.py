"""Recording and replaying a run's clocks and randomness (`RunRequest.tape`, wasm tier):
a replay sees what the recorded run saw, a different read order is `ReplayDiverged`, a
short tape goes live, the monotonic clock does not go backwards, sleeps are skipped while
replaying, and a run without a tape never reaches the recording functions."""

import json

import msgspec
import pytest

from codemode.sandbox import (
    MonotonicRead,
    OutputLimitExceeded,
    RandomBytes,
    RandomU64,
    ReplayDiverged,
    RunRequest,
    SandboxLimits,
    Tape,
    TapeEntry,
    TimeLimitExceeded,
    WallClockRead,
    WasmSandbox,
    _component,
    _tape,
    _wasm,
)
from codemode.sandbox._host import HostStop


def nothing(batch):
    return json.dumps({"results": []})


def run(code, tape=None, wall_clock_s=30.0):
    return WasmSandbox().run(RunRequest(code=code, tape=tape,
                                        limits=SandboxLimits(wall_clock_s=wall_clock_s)),
                             nothing)


@pytest.fixture(scope="module")
def startup():
    """What every run reads before the program starts (the runtime seeds `random`)."""
    outcome = run("pass", Tape())
    assert outcome.status == "ok" and outcome.tape is not None
    assert all(isinstance(e, RandomBytes) for e in outcome.tape.entries)
    return outcome.tape.entries


EVERYTHING = """
import asyncio, datetime, os, random, secrets, time, uuid
print(time.time(), time.monotonic(), time.perf_counter(), datetime.datetime.now())
print(random.random(), random.randint(1, 10**9), uuid.uuid4(), os.urandom(8).hex())
print(secrets.token_hex(8), time.localtime())
time.sleep(0.05)
async def nap():
    await asyncio.sleep(0.05)
    return time.monotonic()
print(asyncio.run(nap()), time.time())
"""


def test_a_replay_prints_what_the_recorded_run_printed():
    recorded = run(EVERYTHING, Tape())
    assert recorded.status == "ok", recorded.error
    assert recorded.tape is not None
    kinds = {type(e) for e in recorded.tape.entries}
    assert {WallClockRead, MonotonicRead, RandomBytes} <= kinds
    replayed = run(EVERYTHING, recorded.tape)
    assert replayed.status == "ok", replayed.error
    assert replayed.stdout == recorded.stdout
    assert replayed.tape == recorded.tape                 # read everything, nothing more
    unrecorded = run(EVERYTHING)
    assert unrecorded.status == "ok" and unrecorded.tape is None
    assert unrecorded.stdout != recorded.stdout            # fresh randomness, a later clock


def test_a_tape_survives_json():
    recorded = run("import os, time\nos.urandom(3), time.time()", Tape())
    text = msgspec.json.encode(recorded.tape)
    assert msgspec.json.decode(text, type=Tape) == recorded.tape
    assert b'"kind":"bytes"' in text and b'"kind":"wall"' in text


def test_reading_in_another_order_diverges(startup):
    recorded = run("import os\nos.urandom(4)", Tape())
    assert recorded.tape.entries[len(startup)] == RandomBytes(
        data=recorded.tape.entries[len(startup)].data)
    replayed = run("import time\ntime.time()", recorded.tape)
    assert replayed.status == "error"
    assert replayed.error == ReplayDiverged(
        message="the program read the wall clock where the recorded run read 4 random "
                f"bytes (entry {len(startup)})")
    assert replayed.tape == Tape(entries=recorded.tape.entries[:len(startup)])


def test_reading_another_number_of_bytes_diverges(startup):
    recorded = run("import os\nos.urandom(4)", Tape())
    replayed = run("import os\nos.urandom(5)", recorded.tape)
    assert isinstance(replayed.error, ReplayDiverged)
    assert replayed.error.message == ("the program read 5 random bytes where the recorded "
                                      f"run read 4 random bytes (entry {len(startup)})")


def test_a_short_tape_is_continued_live(startup):
    first = run("import os\nprint(os.urandom(4).hex())", Tape())
    code = "import os, time\nprint(os.urandom(4).hex())\nprint(os.urandom(4).hex())\ntime.time()"
    second = run(code, first.tape)
    assert second.status == "ok"
    assert second.stdout.splitlines()[0] == first.stdout.strip()
    entries = second.tape.entries
    assert entries[:len(first.tape.entries)] == first.tape.entries
    assert len(entries) == len(first.tape.entries) + 2
    assert isinstance(entries[-2], RandomBytes) and isinstance(entries[-1], WallClockRead)


def test_the_monotonic_clock_does_not_go_back_when_the_replay_ends(startup):
    future_ns = 10**15                             # about 11.6 days: far past this run's clock
    tape = Tape(entries=(*startup, MonotonicRead(nanoseconds=future_ns)))
    outcome = run("import time\na = time.monotonic_ns()\nb = time.monotonic_ns()\n(a, b)", tape)
    assert outcome.status == "ok", outcome.error
    a, b = outcome.value["$tuple"]
    assert a == future_ns and b >= a
    assert outcome.tape.entries[-1] == MonotonicRead(nanoseconds=b)


@pytest.mark.slow
def test_sleeps_are_skipped_while_replaying():
    code = ("import time\nt0 = time.monotonic()\ntime.sleep(1.5)\ntime.sleep(1.5)\n"
            "round(time.monotonic() - t0)")
    recorded = run(code, Tape(), wall_clock_s=30.0)
    assert (recorded.status, recorded.value) == ("ok", 3)
    # Real sleeps of 3 s would end this run at its 2.5 s limit.
    replayed = run(code, recorded.tape, wall_clock_s=2.5)
    assert (replayed.status, replayed.value) == ("ok", 3)
    # Once the tape is used up, sleeps are real again.
    live = run(code, Tape(entries=recorded.tape.entries[:-2]), wall_clock_s=2.5)
    assert isinstance(live.error, TimeLimitExceeded)


def test_sleep_returns_at_once_only_while_entries_remain():
    limits = SandboxLimits(wall_clock_s=0.5)
    replaying = _wasm._Run(limits, nothing, None, Tape(entries=(RandomU64(value=1),)))
    replaying.sleep(10)                                   # would pass the deadline: skipped
    assert replaying.tape.random_u64() == 1 and not replaying.tape.replaying
    with pytest.raises(HostStop) as stopped:
        replaying.sleep(10)
    assert isinstance(stopped.value.error, TimeLimitExceeded)


def test_a_run_without_a_tape_uses_the_plain_linker():
    limits = SandboxLimits(wall_clock_s=30.0)
    runtime = _component.runtime_for(
        _component.EngineConfig(fuel=False, stack_bytes=limits.stack_bytes),
        _wasm._host_dispatch, _wasm._host_sleep, _wasm._SHADOWS)
    assert runtime.linker is not runtime.recording_linker
    before = runtime.shadowed_calls
    assert run(EVERYTHING).status == "ok"
    assert runtime.shadowed_calls == before
    assert run(EVERYTHING, Tape()).status == "ok"
    assert runtime.shadowed_calls > before


@pytest.mark.slow
def test_a_recorded_run_past_the_entry_bound_goes_on_unrecorded():
    program = (f"import time\nfor _ in range({_tape.MAX_ENTRIES + 10}):\n    time.time()\n"
               "print('done')")
    outcome = run(program, Tape())
    assert outcome.status == "ok" and outcome.stdout == "done\n"
    assert outcome.tape is not None and not outcome.tape.complete
    assert len(outcome.tape.entries) == _tape.MAX_ENTRIES
    # replaying an incomplete tape reads live past it and records nothing more
    again = run(program, outcome.tape)
    assert again.status == "ok" and again.tape == outcome.tape


def test_random_bytes_past_the_byte_bound_stop_the_recording():
    outcome = run("import os\nfor _ in range(5):\n    os.urandom(300_000)\nprint('ok')", Tape())
    assert outcome.stdout == "ok\n"
    assert outcome.tape is not None and not outcome.tape.complete
    kept = sum(len(getattr(e, "data", b"")) for e in outcome.tape.entries)
    assert kept <= _tape.MAX_TAPE_BYTES


def test_one_read_past_the_read_bound_ends_the_run():
    # The guest's libc reads 256 bytes at a time; a runtime a program tampered with could
    # ask for more in one read, which the host would hold as 32-byte values.
    recorder = _tape.TapeRecorder(Tape())
    assert len(recorder.random_bytes(_tape.MAX_READ_BYTES)) == _tape.MAX_READ_BYTES
    with pytest.raises(HostStop) as stopped:
        recorder.random_bytes(_tape.MAX_READ_BYTES + 1)
    assert isinstance(stopped.value.error, OutputLimitExceeded)
    assert "read them in smaller pieces" in stopped.value.error.message


# ---- the recorder alone ----------------------------------------------------------------

@pytest.mark.parametrize("entry, read, message", [
    (WallClockRead(seconds=1, nanoseconds=2), "monotonic",
     "the program read the monotonic clock where the recorded run read the wall clock "
     "(entry 0)"),
    (MonotonicRead(nanoseconds=1), "u64",
     "the program read a random 64-bit integer where the recorded run read the monotonic "
     "clock (entry 0)"),
    (RandomU64(value=1), "bytes",
     "the program read 16 random bytes where the recorded run read a random 64-bit integer "
     "(entry 0)"),
    (WallClockRead(seconds=1, nanoseconds=10**9), "wall",
     "entry 0 of the tape (the wall clock) cannot be replayed: its seconds must be in "
     "0..2**64-1 and its nanoseconds in 0..999999999"),
    (RandomU64(value=-1), "u64",
     "entry 0 of the tape (a random 64-bit integer) cannot be replayed: its value must be "
     "in 0..2**64-1"),
])
def test_the_recorder_names_both_reads_when_they_differ(entry: TapeEntry, read, message):
    recorder = _tape.TapeRecorder(Tape(entries=(entry,)))
    reads = {"wall": recorder.wall_clock, "monotonic": recorder.monotonic,
             "u64": recorder.random_u64, "bytes": lambda: recorder.random_bytes(16)}
    with pytest.raises(HostStop) as stopped:
        reads[read]()
    assert stopped.value.error == ReplayDiverged(message=message)
    assert recorder.tape() == Tape()


def test_the_recorder_keeps_replayed_then_live_reads():
    recorder = _tape.TapeRecorder(Tape(entries=(WallClockRead(seconds=5, nanoseconds=6),)))
    assert recorder.wall_clock() == (5, 6)
    seconds, _ = recorder.wall_clock()
    assert seconds > 5
    value = recorder.random_u64()
    assert recorder.tape().entries[0] == WallClockRead(seconds=5, nanoseconds=6)
    assert recorder.tape().entries[2] == RandomU64(value=value)
    assert len(recorder.tape().entries) == 3
