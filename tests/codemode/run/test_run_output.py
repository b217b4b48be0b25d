"""A run's output through `run_code`: output over its limit is cut and marked, not a failed
run (its tool calls stand, the whole is kept for the caller), and `on_output` gets the
output as the program prints it."""

import asyncio
import threading

import pytest
from msgspec import UNSET

from codemode import CodeMode, Session, events, tool
from codemode.sandbox import RestrictedProcessSandbox, RestrictedSandbox, SandboxLimits, WasmSandbox

TIERS = {"wasm": WasmSandbox, "restricted": RestrictedSandbox,
         "process": RestrictedProcessSandbox}


SEEN: list[int] = []


@tool
def record(n: int) -> int:
    """Record `n` (a side effect the test counts); returns it."""
    SEEN.append(n)
    return n

_printed = threading.Event()


@tool
async def wait_for_first() -> bool:
    """Returns once the caller saw the program's first line (False after 60 s)."""
    return await asyncio.to_thread(_printed.wait, 60)


@pytest.fixture(params=list(TIERS))
def tier(request):
    return TIERS[request.param]()


@pytest.fixture
def session(tmp_path):
    SEEN.clear()
    _printed.clear()
    s = Session(tools=[record, wait_for_first], log=str(tmp_path / "session.jsonl"))
    yield s
    s.log.close()


def dispatched(session):
    return [e for e in session.log.read() if isinstance(e, events.CodeDispatch)]


@pytest.mark.slow
async def test_output_and_value_over_the_limit_are_cut_and_the_run_succeeds(session, tier):
    mode = CodeMode(session, sandbox=tier)
    code = ("record(n=1)\n"
            "print('x' * 3_000_000)\n"
            "record(n=2)\n"
            "['y' * 1000] * 2000")
    result = await session.call("run_code", {"code": code}, call_id="big")
    assert not result.is_error, result.text
    value = result.value
    assert [(c["part"], c["kept_bytes"]) for c in value["cut"]] == [
        ("stdout", 1 << 20), ("value", 1 << 20)]
    assert value["cut"][0]["total_bytes"] == 3_000_001
    assert value["cut"][1]["total_bytes"] > 2_000_000
    assert "".join(value["logs"]).endswith(
        "[... stdout truncated at 1048576 bytes of 3000001]\n")
    assert value["result"][0] == "y" * 1000 and value["result"][-1]["$cut"].endswith(
        "more items")
    assert ("[output cut to fit: stdout kept 1048576 of 3000001 bytes; value kept 1048576 "
            "of") in result.text
    assert "do not run it again" in result.text
    # The calls ran once each; the whole is the caller's.
    assert SEEN == [1, 2] and len(dispatched(session)) == 2
    full = mode.full_output("big")
    assert full.stdout == "x" * 3_000_000 + "\n"
    assert full.value == ["y" * 1000] * 2000
    assert full.stderr is None
    assert mode.full_output("unknown") is None


async def test_a_run_within_its_limits_has_no_cut(session):
    mode = CodeMode(session, sandbox=RestrictedSandbox())
    result = await session.call("run_code", {"code": "print('hi')\n[1, 2]"}, call_id="small")
    assert "cut" not in result.value and result.value["result"] == [1, 2]
    assert "output cut" not in result.text
    assert mode.full_output("small") is None


@pytest.mark.slow
async def test_output_past_the_cap_fails_with_what_was_printed_kept(session):
    limits = SandboxLimits(output_bytes=1000, full_output_bytes=2000)
    mode = CodeMode(session, sandbox=RestrictedSandbox(), limits=limits)
    result = await session.call("run_code", {"code": "record(n=1)\nprint('z' * 5000)"},
                                call_id="capped")
    assert result.is_error and "code run failed (output): stdout exceeded 2000" in result.text
    full = mode.full_output("capped")
    assert full.stdout.startswith("z" * 2000)
    assert full.value is UNSET


@pytest.mark.slow
async def test_on_output_gets_each_piece_while_the_program_runs(session, tier):
    """The program prints, then waits in a tool call until the caller has seen the print."""
    seen = []

    def on_output(call_id, stream, text):
        seen.append((call_id, stream, text))
        if "".join(t for _, s, t in seen if s == "stdout") == "first\n":
            _printed.set()

    CodeMode(session, sandbox=tier, on_output=on_output)
    code = ("import warnings\nprint('first')\nseen = wait_for_first()\n"
            "print('second')\nwarnings.warn('oops')\nseen")
    result = await session.call("run_code", {"code": code}, call_id="s1")
    assert not result.is_error, result.text
    assert result.value["result"] is True          # it saw "first" before the run ended
    assert {c for c, _, _ in seen} == {"s1"}
    assert "".join(t for _, s, t in seen if s == "stdout") == "first\nsecond\n"
    stderr = "".join(t for _, s, t in seen if s == "stderr")
    assert stderr == result.value["stderr"] and "UserWarning: oops" in stderr


async def test_output_printed_before_a_failure_was_streamed_and_kept(session):
    seen = []
    CodeMode(session, sandbox=RestrictedSandbox(),
             on_output=lambda call_id, stream, text: seen.append(text))
    result = await session.call("run_code", {"code": "print('before')\n1 / 0"})
    assert result.is_error and "Captured output:\nbefore" in result.text
    assert "".join(seen) == "before\n"


async def test_a_failing_on_output_is_logged_and_the_run_goes_on(session, caplog):
    def broken(call_id, stream, text):
        raise RuntimeError("caller bug")

    CodeMode(session, sandbox=RestrictedSandbox(), on_output=broken)
    result = await session.call("run_code", {"code": "print('a')\n1"})
    assert not result.is_error and result.value["result"] == 1
    assert "the on_output callback failed" in caplog.text
