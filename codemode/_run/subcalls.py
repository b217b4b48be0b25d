"""One run's sub-calls as the dispatcher keeps them, and what the program is answered
(docs/design.md §4).

What the dispatcher knows of each call besides its place in the scheduler (`_SubCall`), the
call until it is answered (`_Slot`), the counts for the `run_code` result
(`SubCallSummary`), and the answer a settled call gives the program: its value, or its
binding rejection's code (`_answer_of`, `rejections`). Separate from `dispatch`, which
moves these through the pipeline, and shared with the replay of a paused run (`resumed`),
which answers them from its record.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import msgspec

from codemode.pipeline import CallResult, Scheduled, Signal
from codemode.sandbox import SubCallErr, SubCallOk, SubCallOutcome

from .rejections import rejection_code
from .tagged import escape


@dataclass
class SubCallSummary:
    """Counts over one run's sub-calls, for the `run_code` result: tool calls (`total`,
    `failed`, `denied`, `by_tool`) and, apart from them, calls of `search_tools` and
    `describe` (`discovery`, in the JSON only when the program made any)."""

    total: int = 0
    failed: int = 0
    denied: int = 0
    by_tool: dict[str, int] = field(default_factory=dict)
    discovery: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {"total": self.total, "failed": self.failed,
                                 "denied": self.denied, "by_tool": dict(self.by_tool)}
        if self.discovery:
            value["discovery"] = dict(self.discovery)
        return value


_encode = msgspec.json.Encoder().encode


class _SubCall(msgspec.Struct, frozen=True, kw_only=True):
    """What the dispatcher knows of one sub-call besides its place in the scheduler (whose
    `CallState` says where it is). A Struct: made once per sub-call, it costs a tenth of a
    frozen dataclass."""

    guest_id: int
    n: int
    sub_call_id: str
    name: str
    arguments: Any                  # the guest's JSON, decoded and frozen once (`snapshot`)
    invalid: str | None             # the guest found it did not fit the signature: why
    signal: Signal                  # the run's scope, and the program's own cancel


@dataclass(eq=False, slots=True)         # compared by identity: a slot is one call
class _Slot:
    """One call the program sent, until it is answered: run live (`scheduled`), or
    answered from the record of a paused run (`reply` set from the start)."""

    sub: _SubCall
    done: asyncio.Future[None]
    scheduled: Scheduled | None = None
    reply: SubCallOutcome | None = None
    answered_by: str = ""            # the sub-call whose outcome answers it
    deferred: bool = False           # its approval was deferred: it waits, unanswered
    reason: str | None = None        # why it needs approval


def _answer_of(guest_id: int, result: CallResult, ran: bool,
               tagged: bool = False) -> SubCallOutcome:
    """What the program is answered for a settled call: its value as the wire carries it
    (`tagged`: the tool's values are already in the wire's tagged form, an MCP tool's;
    else a one-key dict whose key is a wire tag is escaped, `tagged.escape`); `ran`: its
    tool's body ran (the pipeline's fact, whatever the failure's code: a failure then
    carries its labels)."""
    if not result.is_error:
        value = result.value
        if not tagged and b'"$' in _encode(value):
            value = escape(value)
        return SubCallOk(id=guest_id, value=value)
    assert result.error is not None
    return SubCallErr(id=guest_id, code=rejection_code(result), message=result.error.message,
                      ran=ran)


def _is_media(block: Any) -> bool:
    """An image, audio, embedded resource or any other block that is not text."""
    return isinstance(block, dict) and block.get("type") != "text"


def _all_text(content: tuple[Any, ...]) -> bool:
    """No block of `content` is media (a tool's usual one text block: without a generator)."""
    if len(content) == 1:
        return not _is_media(content[0])
    return not any(_is_media(b) for b in content)
