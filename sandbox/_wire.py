"""Sub-call batches as they cross the WIT boundary (JSON text in `host.dispatch`).

Request from the guest: `{"calls": [{"id", "name", "args", "invalid"?}], "cancel": [id],
"wait_s": float | null, "until": [id] | null}`; `invalid` (a string) marks a call that did not
fit the tool's signature (the guest's Python-style message), sent so that the host records
the attempt and answers it `INVALID_ARGS`. The host starts `calls` in order, aborts `cancel`,
and answers once one of `until` (null: any call in flight) settled or `wait_s` seconds
passed: `{"results": [{"id", "ok": true, "value"} | {"id", "ok": false, "code",
"message"}]}`, each call that settled since the previous answer, once.

The guest is untrusted: the runner decodes every batch with these Structs (unknown fields,
such as a forged parent token, are dropped), bounds `wait_s` by the run's deadline, and
re-encodes it before the dispatcher sees it, with `indefinite` set when the guest's own
`wait_s` was null.
"""

from typing import Any

import msgspec


class SubCall(msgspec.Struct, frozen=True, omit_defaults=True):
    id: int
    name: str
    args: msgspec.Raw           # kept as the guest's JSON text: decoded once, by the dispatcher
    invalid: str | None = None  # the call did not fit the signature: why (a Python TypeError text)


class BatchRequest(msgspec.Struct, frozen=True):
    calls: list[SubCall] = []
    cancel: list[int] = []
    wait_s: float | None = None
    until: list[int] | None = None
    # Set by the host, never read from the guest: the program sent `wait_s: null` (no timer
    # of its own), so only a settled call can wake it; the host then bounded `wait_s` by
    # the deadline. A dispatcher may pause such a run when nothing it waits for can settle.
    indefinite: bool = False


class SubCallResult(msgspec.Struct, frozen=True, omit_defaults=True):
    id: int
    ok: bool
    value: Any = None
    code: str | None = None
    message: str | None = None


class BatchReply(msgspec.Struct, frozen=True):
    results: list[SubCallResult] = []


request_decoder = msgspec.json.Decoder(BatchRequest)
reply_decoder = msgspec.json.Decoder(BatchReply)
encoder = msgspec.json.Encoder()
