"""Sub-call batches as they cross the WIT boundary (JSON text in `host.dispatch`), turned
into the host's typed batch (`SubCallBatch`) and back.

Request from the guest: `{"calls": [{"id", "name", "args", "invalid"?}], "cancel": [id],
"wait_s": float | null, "until": [id] | null}`; `invalid` (a string) marks a call that did not
fit the tool's signature (the guest's Python-style message), sent so that the host records
the attempt and answers it `INVALID_ARGS`. The answer to the guest: `{"results": [{"id",
"ok": true, "value"} | {"id", "ok": false, "code", "message"}]}`.

The guest is untrusted: every batch is decoded with these Structs once (unknown fields,
such as a forged parent token, are dropped), and each call's arguments are decoded and
checked (`RunHost.dispatch_batch`) before the dispatcher sees the batch.
"""

from typing import Any

import msgspec

from ._protocol import SubCallBatch, SubCallErr, SubCallOk, SubCallReply


class GuestCall(msgspec.Struct, frozen=True):
    id: int
    name: str
    args: msgspec.Raw           # the guest's JSON text, decoded by the host once
    invalid: str | None = None  # the call did not fit the signature: why (a Python TypeError text)


class GuestBatch(msgspec.Struct, frozen=True):
    calls: list[GuestCall] = []
    cancel: list[int] = []
    wait_s: float | None = None
    until: list[int] | None = None


class _GuestOutcome(msgspec.Struct, frozen=True, omit_defaults=True):
    id: int
    ok: bool
    value: Any = None
    code: str | None = None
    message: str | None = None


class _GuestReply(msgspec.Struct, frozen=True):
    results: list[_GuestOutcome]


request_decoder = msgspec.json.Decoder(GuestBatch)
_reply_decoder = msgspec.json.Decoder(_GuestReply)
_encoder = msgspec.json.Encoder()


def encode_reply(reply: SubCallReply) -> str:
    """The reply as the guest reads it.

    Raises:
        TypeError, ValueError: `reply` is not a `SubCallReply`, or a value is not JSON.
    """
    if type(reply) is not SubCallReply:
        raise TypeError(f"a dispatch returned {type(reply).__name__}, not a SubCallReply")
    results = []
    for r in reply.results:
        if type(r) is SubCallOk:
            results.append(_GuestOutcome(id=r.id, ok=True, value=r.value))
        elif type(r) is SubCallErr:
            results.append(_GuestOutcome(id=r.id, ok=False, code=r.code, message=r.message))
        else:
            raise TypeError(f"a reply holds {type(r).__name__}, not SubCallOk or SubCallErr")
    return _encoder.encode(_GuestReply(results)).decode()


# A restricted-tier worker process relays its program's batches in the guest's format, and
# reads the host's reply back (`_worker_main._Channel`): the two functions below.


def encode_batch(batch: SubCallBatch) -> str:
    """`batch` as the program sent it: each call's JSON text unchanged, and `wait_s` null
    when the program gave no timer of its own (`indefinite`), so that the host that reads
    it bounds the wait by its own deadline and marks it indefinite again."""
    calls = [GuestCall(id=c.id, name=c.name, args=c.args, invalid=c.invalid)
             for c in batch.calls]
    return _encoder.encode(GuestBatch(
        calls=calls, cancel=list(batch.cancel),
        wait_s=None if batch.indefinite else batch.wait_s,
        until=None if batch.until is None else list(batch.until))).decode()


def decode_reply(text: str) -> SubCallReply:
    """A reply the host encoded for the guest (`encode_reply`), typed again.

    Raises:
        msgspec.DecodeError: `text` is not such a reply.
    """
    return SubCallReply(results=tuple(
        SubCallOk(id=r.id, value=r.value) if r.ok
        else SubCallErr(id=r.id, code=r.code or "", message=r.message or "")
        for r in _reply_decoder.decode(text).results))
