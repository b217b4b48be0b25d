"""What the host and a restricted-tier worker process say to each other
(`_worker_host.py` <-> `_worker_main.py`): one JSON line per message, on the worker's
private pipes.

    host -> worker   Start (one run), then per sub-call batch the worker sent: Reply or Stopped
    worker -> host   Ready once at start; per run: Call* and Output*, then Done

The host never trusts what the worker says: the program runs there. Every batch goes
through the host's own `RunHost.dispatch_batch` (decoded, counted, bounded), and the
outcome is checked again (output and value sizes, the sub-call count) before the caller
sees it.
"""

from __future__ import annotations

import msgspec

from ._protocol import AnyRunError, RunOutcome, RunRequest


class Start(msgspec.Struct, frozen=True, tag="start"):
    """Run one program (the in-process tier's `RestrictedSandbox.run` in the worker)."""

    request: RunRequest


class Reply(msgspec.Struct, frozen=True, tag="reply"):
    """The host's dispatch answered the batch: the reply text (`sandbox._wire`)."""

    text: str


class Stopped(msgspec.Struct, frozen=True, tag="stopped"):
    """The host ended the run at this batch (a limit, a malformed batch, a pause): the
    worker raises it into the program as that limit."""

    error: AnyRunError


class Ready(msgspec.Struct, frozen=True, tag="ready"):
    pid: int


class Call(msgspec.Struct, frozen=True, tag="call"):
    """One sub-call batch from the program (JSON text, `sandbox._wire`)."""

    batch: str


class Output(msgspec.Struct, frozen=True, tag="output"):
    """What the program wrote to `stream` ("stdout" or "stderr") since the last Output:
    the host captures the run's output from these alone (a Done's stdout and stderr are
    empty), so what was sent survives a worker that is killed."""

    stream: str
    text: str


class Done(msgspec.Struct, frozen=True, tag="done"):
    """The run ended. `recycle`: the worker should not be reused (a thread it could not
    stop, or memory it did not give back)."""

    outcome: RunOutcome
    recycle: bool = False


ToWorker = Start | Reply | Stopped
FromWorker = Ready | Call | Output | Done

encoder = msgspec.json.Encoder()
to_worker = msgspec.json.Decoder(ToWorker)
from_worker = msgspec.json.Decoder(FromWorker)
