"""Session events (docs/pipeline-spec.md §10, docs/design.md §6): one tagged union of frozen
Structs.

JSON shape: the tag field ``type`` holds the event kind (``"tool/call"``, ...); field names are
camelCase (``call_id`` -> ``callId``). Every event has the envelope ``seq`` (1-based position
in its log) and ``time`` (Unix time, seconds); both are assigned by ``SessionLog.append`` —
construct events without them. Optional fields default to ``msgspec.UNSET`` and are left out
of the JSON when unset.

Readers branch with ``match``::

    match event:
        case ToolCall(call_id=cid): ...
        case ToolResult(message=msg): ...

Schema evolution: new fields get defaults; existing fields never change type.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "ApprovalAsked",
    "ApprovalDecided",
    "ApprovalDecision",
    "ApprovalPolicyChanged",
    "CodeApprovalUsed",
    "CodeDispatch",
    "CodeDispatchStart",
    "CodeLookup",
    "CodeReplayed",
    "CodeResumed",
    "ErrorInfo",
    "Event",
    "FsObserved",
    "HookInvoked",
    "HookResult",
    "InboxQueued",
    "MessageSource",
    "PendingApproval",
    "SessionEvent",
    "StepEnd",
    "StepStart",
    "ToolCall",
    "ToolResult",
    "ToolResultBlock",
    "ToolResultMessage",
    "ToolResumed",
    "ToolSuspended",
    "TurnEnd",
    "TurnStart",
    "UserMessage",
    "UserMessageBody",
    "decode_event",
    "encode_event",
]


#: an SQLite INTEGER key (a larger one could never be stored or follow)
_Seq = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]


class ErrorInfo(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Structured failure info ``{name, code}`` (only for typed harness errors)."""

    name: str
    code: str


class MessageSource(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Where a message came from: ``kind`` is ``"tool"`` or ``"context"`` (plus callers' own)."""

    kind: str
    call_id: str | UnsetType = UNSET


class ToolResultBlock(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The single ``tool-result`` block of a tool message."""

    type: Literal["tool-result"] = "tool-result"
    tool_call_id: str
    content: tuple[Any, ...]          # content blocks, e.g. {"type": "text", "text": "..."}
    is_error: bool


class ToolResultMessage(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The user-role tool message carried by ``tool/result``."""

    id: str
    role: Literal["user"] = "user"
    source: MessageSource
    # one block: a stored result without one answers no call (decoding refuses it)
    content: Annotated[tuple[ToolResultBlock, ...], msgspec.Meta(min_length=1)]


class UserMessageBody(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A user-role message made of content blocks (e.g. a delivered additional context)."""

    id: str
    role: Literal["user"] = "user"
    source: MessageSource
    content: tuple[Any, ...]


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", rename="camel"):
    """Envelope shared by every event. ``seq``/``time`` are 0 until the log assigns them."""

    seq: _Seq = 0                     # 1-based position in the log
    time: float = 0.0                 # Unix time, seconds


class TurnStart(Event, tag="turn/start", frozen=True):
    turn: int


class TurnEnd(Event, tag="turn/end", frozen=True):
    turn: int
    reason: str = "completed"         # "completed" | "concluded" | "cancelled" | "interrupted"


class StepStart(Event, tag="step/start", frozen=True):
    turn: int
    step: int


class StepEnd(Event, tag="step/end", frozen=True):
    turn: int
    step: int


class ToolCall(Event, tag="tool/call", frozen=True):
    """A top-level call started. ``arguments`` is the model's raw JSON text, unparsed."""

    turn: int
    step: int
    call_id: str
    name: str
    arguments: str


class ToolResult(Event, tag="tool/result", frozen=True):
    """The committed outcome of one ``tool/call`` (surface event)."""

    turn: int
    step: int
    message: ToolResultMessage
    error: ErrorInfo | UnsetType = UNSET      # only for structured failures
    meta: Any | UnsetType = UNSET             # only when present
    # the traceback of what the tool's body raised, for the developer (never the model)
    traceback: str | UnsetType = UNSET
    surface_op: str = "append"
    source_event_seqs: tuple[int, ...] = ()   # (seq of the matching tool/call,)

    @property
    def call_id(self) -> str:
        return self.message.content[0].tool_call_id

    @property
    def is_error(self) -> bool:
        return self.message.content[0].is_error

    @property
    def content(self) -> tuple[Any, ...]:
        return self.message.content[0].content


class CodeDispatchStart(Event, tag="tool/code-dispatch-start", frozen=True):
    """A Code-Mode sub-call started. ``arguments`` is the normalized JSON value. Log-only."""

    root_call_id: str
    parent_call_id: str
    sub_call_id: str
    name: str
    arguments: Any


class CodeDispatch(Event, tag="tool/code-dispatch", frozen=True):
    """A Code-Mode sub-call settled; ``content`` is its final model-facing blocks. Log-only.

    ``code`` (failures only) is the stable code of the rejection the program received:
    ``DENIED`` for a denial (pre-execute, approval, guard, post-execute block),
    ``TOOL_ERROR`` for a tool that raised an untyped exception, else the typed error's code
    (``INVALID_ARGS``, ``HOOK_FAILED``, ``TOOL_OUTCOME_UNKNOWN``, ...). Logs written before
    the field existed have none.

    ``answer`` is what the program was answered (Code Mode's ``{"reply": {"ok": true,
    "value": ...}, "seal": ...}``), kept only for the sub-calls a resumed run ran live: a
    resumption that crashed leaves them settled, and the next resumption answers them from
    here instead of running them again (when the seal checks)."""

    root_call_id: str
    parent_call_id: str
    sub_call_id: str
    name: str
    arguments: Any
    is_error: bool
    content: tuple[Any, ...]
    code: str | UnsetType = UNSET
    answer: Any | UnsetType = UNSET
    # the traceback of what the tool's body raised, for the developer (never the program)
    traceback: str | UnsetType = UNSET


class CodeReplayed(Event, tag="tool/code-replayed", frozen=True):
    """A sub-call of a resumed Code-Mode run answered from the log: its tool did not run
    again. ``replayed_from`` is the sub-call id whose recorded outcome answered it (its
    ``tool/code-dispatch`` holds the result). Log-only."""

    root_call_id: str
    parent_call_id: str
    sub_call_id: str
    name: str
    arguments: Any
    replayed_from: str


class CodeLookup(Event, tag="tool/code-lookup", frozen=True):
    """A Code-Mode program's call of a function the host answers itself (tool discovery:
    ``search_tools``, ``describe``; ``read_output``): no tool ran and no policy applied.
    ``name`` is the function's wire name; ``code`` (failures only) the rejection the program
    received (``INVALID_ARGS``, ``UNKNOWN_TOOL``, ``NOT_FOUND``). Log-only."""

    root_call_id: str
    parent_call_id: str
    sub_call_id: str
    name: str
    arguments: Any
    is_error: bool
    code: str | UnsetType = UNSET


class PendingApproval(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One approval a suspended call waits on. ``id`` is stable (a sub-call's is
    ``"<run id>:<n>"``): decisions name it."""

    id: str
    tool_name: str
    arguments: Any
    reason: str | UnsetType = UNSET


class ApprovalDecision(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The answer to one ``PendingApproval``: approved, or denied with an optional reason."""

    id: str
    approved: bool
    reason: str | UnsetType = UNSET


class ToolSuspended(Event, tag="tool/suspended", frozen=True):
    """A call returned a pending result: it waits on ``requests``, and
    ``Session.resume(run_id, decisions)`` goes on from ``state`` (the tool's own JSON).
    ``call_id`` is the call that returned it (the run's first call, or its latest
    resumption); ``arguments`` are that call's, given again to the resumed call."""

    run_id: str
    call_id: str
    name: str
    arguments: Any
    requests: tuple[PendingApproval, ...]
    state: Any
    agent: str | UnsetType = UNSET


class ToolResumed(Event, tag="tool/resumed", frozen=True):
    """``Session.resume`` consumed the latest ``tool/suspended`` of ``run_id`` with these
    decisions; ``call_id`` is the resuming call. A run is resumed at most once per
    suspension."""

    run_id: str
    call_id: str
    decisions: tuple[ApprovalDecision, ...]


class CodeResumed(Event, tag="tool/code-resumed", frozen=True):
    """A resumed Code-Mode run went live: it replayed the paused run's record to the
    exchange where the run paused, and its approved calls start now. ``parent_call_id`` is
    the resuming call; ``record_seal`` the seal of the record it used; ``decisions`` the
    decisions it applies; ``seal`` a seal over all of them, by the tool that wrote it (the
    pipeline neither writes nor checks it). Log-only."""

    root_call_id: str
    parent_call_id: str
    run_id: str
    record_seal: str
    decisions: tuple[ApprovalDecision, ...]
    seal: str


class CodeApprovalUsed(Event, tag="tool/code-approval-used", frozen=True):
    """A Code-Mode run that follows a plan approval started: from now on the approval is
    used. ``parent_call_id`` is the run's call; ``approval_id`` and ``approval_seal`` name
    the approval; ``seal`` is a seal over them, by the tool that wrote it (the pipeline
    neither writes nor checks it). Log-only."""

    root_call_id: str
    parent_call_id: str
    approval_id: str
    approval_seal: str
    seal: str


class HookInvoked(Event, tag="hook/invoked", frozen=True):
    turn: int
    point: str
    dialect: str
    handler_id: str
    matcher: str | UnsetType = UNSET


class HookResult(Event, tag="hook/result", frozen=True):
    turn: int
    point: str
    handler_id: str
    decision: str
    duration_ms: float
    exit_code: int | UnsetType = UNSET
    stderr_summary: str | UnsetType = UNSET


class FsObserved(Event, tag="fs/observed", frozen=True):
    """The filesystem gate saw a file (docs/pipeline-spec.md §9). ``version`` only when present."""

    key: str
    state: Literal["absent", "present"]
    agent: str | None = None
    version: str | UnsetType = UNSET


class UserMessage(Event, tag="user/message", frozen=True):
    """A user-role message entering the transcript (e.g. a delivered additional context)."""

    turn: int
    message: UserMessageBody
    surface_op: str = "append"
    source_event_seqs: tuple[int, ...] = ()


class InboxQueued(Event, tag="inbox/queued", frozen=True):
    """A message entered the next-step inbox (log-only). It becomes model-visible when a
    ``user/message`` with the same ``message.id`` is appended at a step boundary; a queued
    message without one is still pending (it survives a reload)."""

    turn: int
    message: UserMessageBody
    source_event_seqs: tuple[int, ...] = ()


class ApprovalAsked(Event, tag="approval/asked", frozen=True):
    id: str
    tool_name: str
    call_id: str | UnsetType = UNSET
    reason: str | UnsetType = UNSET


class ApprovalDecided(Event, tag="approval/decided", frozen=True):
    id: str
    outcome: str
    by: str | UnsetType = UNSET      # what gave the decision, when not someone asked now


class ApprovalPolicyChanged(Event, tag="approval/policy", frozen=True):
    policy: str


SessionEvent: TypeAlias = (
    TurnStart
    | TurnEnd
    | StepStart
    | StepEnd
    | ToolCall
    | ToolResult
    | CodeDispatchStart
    | CodeDispatch
    | CodeReplayed
    | CodeLookup
    | CodeResumed
    | CodeApprovalUsed
    | ToolSuspended
    | ToolResumed
    | HookInvoked
    | HookResult
    | FsObserved
    | UserMessage
    | InboxQueued
    | ApprovalAsked
    | ApprovalDecided
    | ApprovalPolicyChanged
)

_encoder = msgspec.json.Encoder()


@functools.cache
def _decoder() -> msgspec.json.Decoder[SessionEvent]:
    """The typed decoder of every event, built once, on the first decode: resolving the
    union's annotations is most of this module's import time, which a session that never
    reads a log back (``log=None``, or only appends) need not pay."""
    return msgspec.json.Decoder(SessionEvent)


def encode_event(event: Event) -> bytes:
    """Encode one event as compact JSON bytes."""
    return _encoder.encode(event)


def decode_event(data: bytes | str) -> Event:
    """Decode one event from its JSON text (``bytes`` or ``str``).

    Raises:
        msgspec.ValidationError: valid JSON that is not an event (says where).
        msgspec.DecodeError: not JSON, not text at all (an SQLite NULL or integer), or nested
            deeper than the decoder can follow (a ``RecursionError`` inside msgspec).
    """
    if not isinstance(data, (bytes, bytearray, memoryview, str)):
        raise msgspec.DecodeError(f"an event is JSON text, not {type(data).__name__}")
    try:
        event: Event = _decoder().decode(data)
    except RecursionError:
        raise msgspec.DecodeError("JSON nested too deeply to decode") from None
    return event
