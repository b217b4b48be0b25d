"""`sandbox._host`: the host side of a run both tiers share, driven without any guest."""

import json
import threading

import msgspec
import pytest
from msgspec import UNSET

from codemode.sandbox import (
    GuestCrashed,
    HostDispatchFailed,
    OutputLimitExceeded,
    PauseRun,
    ProgramError,
    RunAborted,
    RunPaused,
    SandboxLimits,
    SubCallBatch,
    SubCallErr,
    SubcallLimitExceeded,
    SubCallOk,
    SubCallReply,
    TimeLimitExceeded,
)
from codemode.sandbox._host import (
    LIMIT_ERRORS,
    GuestError,
    GuestLimited,
    GuestOk,
    HostStop,
    RunHost,
    decode_guest,
    outcome,
)

from .conftest import echo


def host(**limits):
    return RunHost(SandboxLimits(**{"wall_clock_s": 5.0, **limits}), echo, None)


def batch(*ids):
    return json.dumps({"calls": [{"id": i, "name": "t", "args": {}} for i in ids]})


def test_every_limit_kind_has_one_error_class():
    assert {kind: cls(message="m").kind for kind, cls in LIMIT_ERRORS.items()} == {
        kind: kind for kind in ("timeout", "fuel", "memory", "output", "subcalls", "abort",
                                "dispatch", "paused")}


@pytest.mark.parametrize("text, ended", [
    ('{"status": "ok", "value": {"$tuple": [1]}}',
     GuestOk(value=msgspec.Raw(b'{"$tuple": [1]}'))),
    ('{"status": "ok"}', GuestOk()),
    ('{"status": "limit", "limit": "output", "error": {"message": "stdout exceeded 9 bytes"}}',
     GuestLimited(limit="output", error=GuestError(message="stdout exceeded 9 bytes"))),
])
def test_the_guest_outcome_decodes_to_a_tagged_struct(text, ended):
    assert decode_guest(text) == ended


@pytest.mark.parametrize("text", ['{"status": "limit", "limit": "time"}', '{"status": 1}',
                                  "not json"])
def test_a_malformed_guest_outcome_is_a_crash(text):
    assert isinstance(decode_guest(text), GuestCrashed)


def test_outcome_maps_each_ending():
    run = host()
    ok = outcome(run, decode_guest('{"status": "ok", "value": 1}'), duration_s=0.1)
    assert (ok.status, ok.value, ok.error) == ("ok", 1, None)
    failed = outcome(run, decode_guest('{"status": "error", "error": {"type": "KeyError", '
                                       '"message": "\'k\'", "traceback": "t"}}'),
                     duration_s=0.1)
    assert failed.error == ProgramError(type="KeyError", message="'k'", traceback="t")
    limited = outcome(run, decode_guest('{"status": "limit", "limit": "subcalls", '
                                        '"error": {"message": "m"}}'), duration_s=0.1)
    assert (limited.status, limited.error) == ("limit", SubcallLimitExceeded(message="m"))
    dispatch = outcome(run, HostDispatchFailed(message="m"), duration_s=0.1)
    assert dispatch.status == "error"


def test_output_past_the_cap_ends_an_ok_run_at_the_output_limit():
    run = host(output_bytes=4, full_output_bytes=4)
    run.stdout.write(b"hello")
    ended = outcome(run, GuestOk(value=msgspec.Raw(b"1")), duration_s=0.1)
    assert (ended.status, ended.value, ended.error) == (
        "limit", UNSET, OutputLimitExceeded(message="stdout exceeded 4 bytes"))
    assert ended.stdout == "hell\n[... stdout truncated at 4 bytes of more than 4]\n"


def test_output_past_the_limit_is_cut_and_the_run_stays_ok():
    run = host(output_bytes=4)
    run.stdout.write(b"hello")
    ended = outcome(run, GuestOk(value=msgspec.Raw(b"1")), duration_s=0.1)
    assert (ended.status, ended.value, ended.error) == ("ok", 1, None)
    assert ended.stdout == "hell\n[... stdout truncated at 4 bytes of 5]\n"
    assert ended.full.stdout == "hello"


def test_a_value_past_the_cap_is_an_output_limit_even_if_the_guest_let_it_through():
    run = host(output_bytes=4, full_output_bytes=8)
    ended = outcome(run, GuestOk(value=msgspec.Raw(b'"0123456789"')), duration_s=0.1)
    assert (ended.status, ended.value) == ("limit", UNSET)
    assert isinstance(ended.error, OutputLimitExceeded)


def test_dispatch_counts_calls_and_stops_past_the_budget():
    run = host(max_subcalls=2)
    assert json.loads(run.dispatch_batch(batch(1, 2)))["results"][1]["id"] == 2
    with pytest.raises(HostStop) as stopped:
        run.dispatch_batch(batch(3))
    assert stopped.value.error == SubcallLimitExceeded(message="the program made more than "
                                                               "2 sub-calls")


@pytest.mark.parametrize("dispatch, message", [
    (lambda b: "{", "the dispatcher's reply is malformed: a dispatch returned str, not a "
                    "SubCallReply"),
    (lambda b: SubCallReply(results=({"id": 1, "ok": True},)),
     "the dispatcher's reply is malformed: a reply holds dict, not SubCallOk or SubCallErr"),
    (lambda b: SubCallReply(results=(SubCallOk(id=1, value=object()),)),
     "the dispatcher's reply is malformed: "),
    (lambda b: 1 / 0, "the dispatcher raised ZeroDivisionError: division by zero"),
    (lambda b: b.nothing, "the dispatcher raised AttributeError: "),
])
def test_a_failing_dispatcher_is_a_dispatch_failure(dispatch, message):
    run = RunHost(SandboxLimits(), dispatch, None)
    with pytest.raises(HostStop) as stopped:
        run.dispatch_batch(batch(1))
    assert isinstance(stopped.value.error, HostDispatchFailed)
    assert stopped.value.error.message.startswith(message)


def test_the_dispatcher_gets_the_batch_decoded_checked_and_bounded_once():
    seen = []

    def dispatch(batch):
        seen.append(batch)
        return SubCallReply(results=(SubCallOk(id=1, value=[1.5, None]),
                                     SubCallErr(id=2, code="DENIED", message="no")))

    run = RunHost(SandboxLimits(wall_clock_s=5.0), dispatch, None)
    answer = run.dispatch_batch(
        '{"calls": [{"id": 1, "name": "t", "args": {"a": [1, true]}, "parent": "forged"},'
        ' {"id": 2, "name": "u", "args": 7, "invalid": "t() takes 0 arguments"}],'
        ' "cancel": [3], "wait_s": null, "until": [1], "root_call_id": "forged"}')
    [batch] = seen
    assert type(batch) is SubCallBatch
    assert [(c.id, c.name, bytes(c.args), c.arguments, c.invalid) for c in batch.calls] == [
        (1, "t", b'{"a": [1, true]}', {"a": [1, True]}, None),
        (2, "u", b"7", 7, "t() takes 0 arguments")]
    assert (batch.cancel, batch.until, batch.indefinite) == ((3,), (1,), True)
    assert 0 < batch.wait_s <= 5.0                        # null: bounded by the deadline
    assert json.loads(answer) == {"results": [
        {"id": 1, "ok": True, "value": [1.5, None]},
        {"id": 2, "ok": False, "code": "DENIED", "message": "no"}]}


def test_a_malformed_batch_is_refused():
    with pytest.raises(HostStop) as stopped:
        host().dispatch_batch('{"calls": [{"id": "x"}]}')
    assert stopped.value.error.message.startswith("malformed sub-call batch: ")


def test_sleep_is_bounded_by_the_deadline_and_woken_by_cancel():
    run = host(wall_clock_s=0.05)
    with pytest.raises(HostStop) as stopped:
        run.sleep(10)
    assert isinstance(stopped.value.error, TimeLimitExceeded)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(HostStop) as stopped:
        RunHost(SandboxLimits(), echo, cancel).sleep(10)
    assert isinstance(stopped.value.error, RunAborted)


def test_a_dispatcher_that_raises_pause_run_pauses_the_run():
    def pause(batch):
        raise PauseRun("t needs approval")
    run = RunHost(SandboxLimits(), pause, None)
    with pytest.raises(HostStop) as stopped:
        run.dispatch_batch(batch(1))
    assert stopped.value.error == RunPaused(message="t needs approval")
    assert run.subcalls == 1                      # sent, not carried out
    run.stdout.write(b"before\n")
    ended = outcome(run, stopped.value.error, duration_s=0.1)
    assert (ended.status, ended.error, ended.stdout) == (
        "paused", RunPaused(message="t needs approval"), "before\n")
    assert not RunPaused.limit and RunPaused(message="m").kind == "paused"


def test_a_paused_guest_outcome_is_a_paused_run():
    ended = outcome(host(), decode_guest('{"status": "limit", "limit": "paused", '
                                         '"error": {"message": "wait"}}'), duration_s=0.1)
    assert (ended.status, ended.error) == ("paused", RunPaused(message="wait"))


def test_a_relayed_batch_reaches_the_next_host_as_the_program_sent_it():
    """A worker process relays its program's batch (`_wire.encode_batch`) to the host,
    which decodes it once; the host's reply goes back as the guest reads it and is typed
    again there (`_wire.decode_reply`)."""
    from codemode.sandbox import _wire

    seen = []

    def dispatch(batch):
        seen.append(batch)
        return SubCallReply(results=(SubCallOk(id=1, value={"a": [1.5, None]}),
                                     SubCallErr(id=2, code="DENIED", message="no")))

    sent = ('{"calls": [{"id": 1, "name": "t", "args": {"b": 1.0, "a": [true]}},'
            ' {"id": 2, "name": "u", "args": 7, "invalid": "u() takes 0 arguments"}],'
            ' "cancel": [3], "wait_s": null, "until": [1]}')
    worker = RunHost(SandboxLimits(wall_clock_s=5.0), dispatch, None)
    answer = worker.dispatch_batch(sent)
    [first] = seen
    host = RunHost(SandboxLimits(wall_clock_s=5.0), dispatch, None)
    assert host.dispatch_batch(_wire.encode_batch(first)) == answer
    [_, second] = seen
    assert [(bytes(c.args), c.arguments, c.invalid) for c in second.calls] == [
        (b'{"b": 1.0, "a": [true]}', {"b": 1.0, "a": [True]}, None),
        (b"7", 7, "u() takes 0 arguments")]
    assert (second.cancel, second.until, second.indefinite) == ((3,), (1,), True)
    timed = msgspec.structs.replace(first, wait_s=0.25, indefinite=False)
    assert json.loads(_wire.encode_batch(timed))["wait_s"] == 0.25
    assert _wire.decode_reply(answer) == dispatch(first)
