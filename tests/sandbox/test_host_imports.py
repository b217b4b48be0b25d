"""A program calling the sandbox's raw host imports (`wit_world.imports.host`) with any value:
a typed outcome with an accurate message, the output printed so far kept, the host
unharmed. Through the module a program sees, a wrong value is a Python exception in the
program; through the raw bindings behind it, a typed end of the run."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.sandbox import RunRequest, SandboxLimits, WasmSandbox
from tests._fuzz import examples

from .conftest import EchoHost

LIMITS = SandboxLimits(wall_clock_s=5)
HOST = 'print("before")\nimport sys\nhost = sys.modules["wit_world.imports.host"]\n'
RAW = HOST + "raw = host.sleep.__globals__\n"
#: every way a run may end; "error" and "limit" always carry a typed error
TYPED = {"ok", "error", "limit"}


def literal(value: Any) -> str:
    """Python source for `value` (floats such as nan and inf included)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    return repr(value)


@pytest.fixture(scope="module")
def sandbox() -> WasmSandbox:
    return WasmSandbox()


def run(sandbox: WasmSandbox, code: str) -> Any:
    return sandbox.run(RunRequest(code=code, limits=LIMITS), EchoHost())


@pytest.mark.parametrize(("call", "error"), [
    ("host.sleep(-1.0)", ("ValueError", "sleep length must be non-negative")),
    ("host.sleep(float('nan'))", ("ValueError", "sleep length must be non-negative")),
    ("host.sleep('1')", ("TypeError", "sleep length must be a number, not str")),
    ("host.sleep(None)", ("TypeError", "sleep length must be a number, not NoneType")),
    ("host.dispatch(5)", ("TypeError", "host.dispatch takes a str, not int")),
    ("host.dispatch(None)", ("TypeError", "host.dispatch takes a str, not NoneType")),
    ("host.dispatch(b'{}')", ("TypeError", "host.dispatch takes a str, not bytes")),
    ("host.dispatch('\\ud800')", ("ValueError", "host.dispatch takes valid Unicode text: "
                                                "surrogates not allowed at index 0")),
])
def test_a_wrong_value_is_an_exception_in_the_program(sandbox, call, error):
    outcome = run(sandbox, HOST + f"try:\n    {call}\nexcept Exception as e:\n"
                                  "    print(type(e).__name__, e)\n")
    assert outcome.status == "ok", outcome.error
    assert outcome.stdout == f"before\n{error[0]} {error[1]}\n"


@pytest.mark.parametrize(("call", "kind", "message"), [
    ('raw["_raw_sleep"](-1.0)', "dispatch",
     "the program called host.sleep(-1.0): sleep length must be non-negative"),
    ('raw["_raw_sleep"](float("nan"))', "dispatch",
     "the program called host.sleep(nan): sleep length must be non-negative"),
    ('raw["_raw_dispatch"](5)', "trap", "the program called a host import with a value its "
                                        "type cannot carry, and the guest's bindings aborted"),
    ('raw["_raw_dispatch"]("\\ud800")', "trap", "the program called a host import with a "
     "value its type cannot carry, and the guest's bindings aborted"),
    ('raw["_raw_sleep"]("x")', "trap", "the program called a host import with a value its "
                                       "type cannot carry, and the guest's bindings aborted"),
])
def test_the_raw_bindings_end_the_run_typed_and_keep_the_output(sandbox, call, kind, message):
    outcome = run(sandbox, RAW + call)
    assert (outcome.status, outcome.error.kind, outcome.error.message) == ("error", kind,
                                                                           message)
    assert outcome.stdout == "before\n"


@pytest.mark.slow
def test_an_infinite_sleep_is_the_time_limit(sandbox):
    outcome = sandbox.run(RunRequest(code=HOST + "host.sleep(float('inf'))",
                                     limits=SandboxLimits(wall_clock_s=1)), EchoHost())
    assert (outcome.status, outcome.error.kind, outcome.stdout) == ("limit", "timeout",
                                                                    "before\n")


values = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.binary(max_size=8),
    st.text(max_size=8), st.sampled_from(["\ud800", "a\udfffb", "{}", "[]", '{"calls": 5}']),
    st.lists(st.integers(), max_size=3))
batches = st.fixed_dictionaries(
    {"calls": st.lists(st.fixed_dictionaries({
        "id": st.one_of(st.integers(-3, 3), st.text(max_size=2)),
        "name": st.sampled_from(["", "echo", "nope", "\x00", "a" * 300]),
        "args": st.one_of(st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                          st.integers(), st.none())}), max_size=3),
     "cancel": st.lists(st.integers(-2, 2), max_size=2),
     "wait_s": st.one_of(st.none(), st.floats(-1, 0.01)),
     "until": st.none()})


@pytest.mark.slow
@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(import_=st.sampled_from(["dispatch", "sleep", "_raw_dispatch", "_raw_sleep"]),
       value=values)
def test_any_value_to_any_import_has_a_typed_outcome(sandbox, import_, value):
    target = f"host.{import_}" if not import_.startswith("_raw") else f'raw["{import_}"]'
    if import_.endswith("sleep") and isinstance(value, (int, float)) and not isinstance(
            value, bool) and value > 0.01:
        value = 0.01                       # a long sleep is the time limit: tested above
    outcome = run(sandbox, RAW + f"{target}({literal(value)})")
    assert outcome.status in TYPED
    assert outcome.status == "ok" or outcome.error is not None
    assert outcome.stdout.startswith("before\n")


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=batches)
def test_any_batch_has_a_typed_outcome(sandbox, batch):
    outcome = run(sandbox, HOST + f"print(host.dispatch({json.dumps(batch)!r}))")
    assert outcome.status in TYPED
    assert outcome.status == "ok" or outcome.error is not None
    assert outcome.stdout.startswith("before\n")
