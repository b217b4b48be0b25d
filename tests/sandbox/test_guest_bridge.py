"""The guest's tool bridge (`guest/cm_guest/tools.py`) under this Python, beside the host's
decoder: a plain call's one-call batch, its answer or rejection, and the argument checks'
common case, against the general path they shortcut."""

import json

import pytest

from codemode.sandbox import SubCallErr, SubCallOk, SubCallReply, _wire
from codemode.sandbox.guest.cm_guest import errors, tools


class Host:
    """A dispatch that answers each batch with `answers` (a function of the decoded batch),
    keeping every batch it got (decoded by the host's own decoder)."""

    def __init__(self, answers):
        self.answers = answers
        self.batches = []

    def __call__(self, text):
        self.batches.append(_wire.request_decoder.decode(text))
        return json.dumps({"results": self.answers(self.batches[-1])})


def echoed(batch):
    return [{"id": c.id, "ok": True, "value": json.loads(bytes(c.args))} for c in batch.calls]


def test_a_plain_call_is_a_batch_of_itself_that_the_host_decodes():
    host = Host(echoed)
    bridge = tools.Bridge(host, {})
    assert bridge.call("echo", "echo", {"value": 1}) == {"value": 1}
    assert bridge.call("echo", "echo", {"value": "é"}, name_json='"echo"') == {"value": "é"}
    first, second = host.batches
    assert [(c.id, c.name, bytes(c.args)) for c in first.calls] == [
        (1, "echo", b'{"value":1}')]
    assert (first.cancel, first.wait_s, first.until) == ([], None, [1])
    assert second.calls[0].id == 2 and second.until == [2]


def test_a_refused_plain_call_raises_its_rejection():
    host = Host(lambda batch: [{"id": c.id, "ok": False, "code": "DENIED",
                                "message": "no"} for c in batch.calls])
    with pytest.raises(errors.ToolDenied) as raised:
        tools.Bridge(host, {}).call("rm", "rm", {})
    assert (raised.value.tool_name, raised.value.code) == ("rm", "DENIED")


def test_a_plain_call_the_answer_leaves_out_is_waited_for_as_any_call():
    answers = iter([[], [{"id": 1, "ok": True, "value": 7}]])
    host = Host(lambda batch: next(answers))
    assert tools.Bridge(host, {}).call("t", "t", {}) == 7
    first, second = host.batches
    assert len(first.calls) == 1 and (second.calls, second.until) == ([], [1])


def test_a_call_made_while_others_are_queued_goes_with_them():
    host = Host(echoed)
    bridge = tools.Bridge(host, {})
    queued = bridge.submit("a", "a", {"n": 1})
    assert bridge.call("b", "b", {"n": 2}) == {"n": 2}
    assert [c.name for c in host.batches[0].calls] == ["a", "b"]
    assert queued._value() == {"n": 1}


@pytest.mark.parametrize("args", [
    {}, {"a": 1, "b": -2**63, "c": 2**63 - 1}, {"x": 1.5, "y": 0.0, "z": -1e300},
    {"s": "plain", "t": "", "u": "naïve ☃"}, {"t": True, "f": False, "n": None},
    {"clé": 1}, {"nested": {"a": [1, {"b": None}]}, "after": 2},
    {'q"uo\\te\n\x00\x1f': 'q"uo\\te\n\x00\x1f\x7f', "": ""},
    {"f": 1e16, "g": 1e-7, "h": 0.1 + 0.2, "i": -2.5e-300, "j": 123456789.0},
    {"one": 1, "two": [2], "three": 3},
])
def test_encoded_arguments_are_what_json_dumps_makes(args):
    assert tools.encode_args("t", args) == json.dumps(
        args, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@pytest.mark.parametrize(("args", "message"), [
    ({"x": float("nan")}, "t(): arguments['x'] is nan, which is not a JSON value"),
    ({"x": float("-inf")}, "t(): arguments['x'] is -inf, which is not a JSON value"),
    ({"x": -0.0}, "t(): arguments['x'] is -0.0, which JSON does not keep apart from 0"),
    ({"x": 2**63}, "t(): arguments['x'] is an int outside the 64-bit range JSON tools "
                   "accept"),
    ({"x": "\ud800"}, "t(): arguments['x'] contains an unpaired surrogate, which is not "
                      "valid Unicode text"),
    ({"\udc00": 1}, "t(): arguments has a key with an unpaired surrogate, which is not "
                    "valid Unicode text"),
    ({"x": (1,)}, "t(): arguments['x'] is a tuple, which is not a JSON value (use dict, "
                  "list, str, int, float, bool or None)"),
])
def test_arguments_json_cannot_keep_are_refused_with_the_general_checks_message(args, message):
    with pytest.raises(TypeError) as raised:
        tools.encode_args("t", args)
    assert str(raised.value) == message


def host_answer(*results):
    """The answer to a batch as the host encodes it for the guest."""
    return _wire.encode_reply(SubCallReply(results=results))


@pytest.mark.parametrize("value", [
    {"value": 1}, [1, "é", None], "text", 0, -1.5, True, False, {"nested": [{"a": {}}]},
    {"results": [{"id": 1, "ok": True, "value": 2}]},      # a value that looks like an answer
])
def test_a_plain_calls_success_is_read_from_the_value_alone(value):
    text = host_answer(SubCallOk(id=7, value=value))
    assert tools._ok_value(text, 7) == value == tools._decode_reply(text)["results"][0]["value"]


@pytest.mark.parametrize("text", [
    host_answer(SubCallOk(id=7, value=None)),               # the host leaves a None value out
    host_answer(SubCallOk(id=70, value=1)),                 # another call
    host_answer(SubCallOk(id=8, value=1)),
    host_answer(SubCallErr(id=7, code="DENIED", message="no")),
    host_answer(SubCallOk(id=7, value=1), SubCallOk(id=8, value=2)),
    host_answer(),
    '{"results": [{"id": 7, "ok": true, "value": 1}]}',     # not the host's own spacing
    '{"results":[{"id":7,"ok":true,"value":}]}',
    '{"results":[{"id":7,"ok":true,"value":[1}]}',
])
def test_any_other_answer_is_read_whole(text):
    assert tools._ok_value(text, 7) is tools._NOT_OK


def test_a_plain_call_reads_the_hosts_own_answers():
    def host(text):
        batch = _wire.request_decoder.decode(text)
        return host_answer(*(SubCallOk(id=c.id, value=json.loads(bytes(c.args)))
                             for c in batch.calls))
    bridge = tools.Bridge(host, {})
    assert [bridge.call("echo", "echo", {"value": i}) for i in range(3)] == [
        {"value": 0}, {"value": 1}, {"value": 2}]
    assert bridge.call("echo", "echo", {}) == {}
