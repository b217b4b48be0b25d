"""Crash repair on open (PIPELINE.md §10): balance every dangling call, close open turns."""

from __future__ import annotations

from ..events import (
    ErrorInfo,
    Event,
    MessageSource,
    StepEnd,
    StepStart,
    ToolCall,
    ToolResult,
    ToolResultBlock,
    ToolResultMessage,
    TurnEnd,
    TurnStart,
)

__all__ = ["OUTCOME_UNKNOWN_MESSAGE", "repair_events"]

OUTCOME_UNKNOWN_MESSAGE = (
    "the session stopped before this tool call finished, so its outcome is unknown; "
    "it may or may not have taken effect — check the current state before retrying"
)


def repair_events(events: list[Event]) -> list[Event]:
    """Events to append so that a reloaded log is balanced.

    - each ``tool/call`` without a ``tool/result`` gets a failed result with
      ``error={name: "ToolOutcomeUnknown", code: "TOOL_OUTCOME_UNKNOWN"}``, in call order;
    - then an open step gets ``step/end`` and an open turn ``turn/end`` (reason
      ``"interrupted"``).

    Returns an empty list for a clean log.
    """
    pending: dict[str, ToolCall] = {}
    open_turn: int | None = None
    open_step: tuple[int, int] | None = None
    for event in events:
        if isinstance(event, ToolCall):
            pending[event.call_id] = event
        elif isinstance(event, ToolResult):
            pending.pop(event.call_id, None)
        elif isinstance(event, TurnStart):
            open_turn = event.turn
        elif isinstance(event, TurnEnd):
            open_turn = None
            open_step = None
        elif isinstance(event, StepStart):
            open_step = (event.turn, event.step)
        elif isinstance(event, StepEnd):
            open_step = None
    repairs: list[Event] = []
    for call in pending.values():
        text = f"Error: {OUTCOME_UNKNOWN_MESSAGE}"
        repairs.append(
            ToolResult(
                turn=call.turn,
                step=call.step,
                message=ToolResultMessage(
                    id=f"msg_{call.call_id}",
                    source=MessageSource(kind="tool", call_id=call.call_id),
                    content=(
                        ToolResultBlock(
                            tool_call_id=call.call_id,
                            content=({"type": "text", "text": text},),
                            is_error=True,
                        ),
                    ),
                ),
                error=ErrorInfo(name="ToolOutcomeUnknown", code="TOOL_OUTCOME_UNKNOWN"),
                source_event_seqs=(call.seq,),
            )
        )
    if open_step is not None:
        repairs.append(StepEnd(turn=open_step[0], step=open_step[1]))
    if open_turn is not None:
        repairs.append(TurnEnd(turn=open_turn, reason="interrupted"))
    return repairs
