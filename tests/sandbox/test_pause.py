"""Pausing a run (`PauseRun` raised by the dispatch callback), on both tiers: the run ends
at that batch with status "paused", keeps what it printed, and the program cannot catch
the pause and carry on."""


import pytest

from codemode.sandbox import (
    PauseRun,
    RandomBytes,
    RestrictedProcessSandbox,
    RestrictedSandbox,
    RunPaused,
    RunRequest,
    SandboxLimits,
    Tape,
    WasmSandbox,
)

from .conftest import as_json, echo, echo_tool


@pytest.fixture(scope="module", params=["wasm", "restricted", "restricted-process"])
def tier(request):
    if request.param == "wasm":
        return WasmSandbox()
    return RestrictedSandbox() if request.param == "restricted" else RestrictedProcessSandbox()


class PausingHost:
    """Echoes the first `allow` batches, then raises `PauseRun`; records each batch."""

    def __init__(self, allow=0):
        self.allow = allow
        self.batches = []

    def __call__(self, batch):
        request = as_json(batch)
        self.batches.append(request)
        if len(self.batches) > self.allow:
            raise PauseRun(f"{request['calls'][0]['name']} needs approval")
        return echo(batch)


def run(tier, host, code, **request):
    return tier.run(RunRequest(code=code, tools=(echo_tool("t"),),
                               limits=SandboxLimits(wall_clock_s=30.0), **request), host)


CATCHERS = {
    "except BaseException": "try:\n    t(1)\nexcept BaseException:\n    print('swallowed')\n",
    "bare except": "try:\n    t(1)\nexcept:\n    print('swallowed')\n",
    "finally": "try:\n    t(1)\nfinally:\n    print('swallowed')\n",
    "async gather": "import asyncio\nasync def main():\n    try:\n"
                    "        await asyncio.gather(t(1), t(2))\n"
                    "    except BaseException:\n        print('swallowed')\n"
                    "await main()\n",
}


@pytest.mark.parametrize("catcher", list(CATCHERS))
def test_a_pause_ends_the_run_and_the_program_cannot_catch_it(tier, catcher):
    host = PausingHost()
    outcome = run(tier, host, "print('before')\n" + CATCHERS[catcher] + "print('after')")
    assert outcome.status == "paused"
    assert outcome.error == RunPaused(message="t needs approval")
    assert outcome.stdout == "before\n"              # never "swallowed", never "after"
    assert len(host.batches) == 1


def test_a_pause_at_a_later_batch_keeps_the_earlier_results(tier):
    host = PausingHost(allow=1)
    outcome = run(tier, host, "print(t(value=1))\nprint(t(value=2))\nprint('after')")
    assert (outcome.status, outcome.stdout, outcome.subcalls) == (
        "paused", "{'value': 1}\n", 2)


def test_a_paused_run_is_not_a_limit(tier):
    outcome = run(tier, PausingHost(), "t(1)")
    assert not outcome.error.limit and outcome.error.kind == "paused"


def test_a_paused_run_with_a_tape_returns_what_it_read():
    outcome = run(WasmSandbox(), PausingHost(), "import os\nos.urandom(4)\nt(1)", tape=Tape())
    assert outcome.status == "paused"
    assert outcome.tape is not None
    assert outcome.tape.entries[-1] == RandomBytes(data=outcome.tape.entries[-1].data)
    assert len(outcome.tape.entries[-1].data) == 4


def test_the_restricted_tier_ignores_a_tape():
    outcome = run(RestrictedSandbox(), PausingHost(), "import time\ntime.time()", tape=Tape())
    assert (outcome.status, outcome.tape) == ("ok", None)
