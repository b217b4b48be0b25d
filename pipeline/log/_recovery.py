"""Crash repair on open (docs/pipeline-spec.md §10): balance every dangling call, close open
turns."""

from __future__ import annotations

from ..events import (
    CodeDispatch,
    CodeDispatchStart,
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

    - each ``tool/code-dispatch-start`` of the open turn without its ``tool/code-dispatch``
      gets one (``isError``, code ``TOOL_OUTCOME_UNKNOWN``), in start order, so a sub-call
      that was running when the process died is settled before its outer call;
    - each ``tool/call`` without a ``tool/result`` gets a failed result with
      ``error={name: "ToolOutcomeUnknown", code: "TOOL_OUTCOME_UNKNOWN"}``, in call order;
    - then an open step gets ``step/end`` and an open turn ``turn/end`` (reason
      ``"interrupted"``).

    A start left unsettled in a turn that was closed anyway (or outside any turn) cannot
    be settled in place; ``check`` reports it.

    Returns an empty list for a clean log.
    """
    pending: dict[str, ToolCall] = {}
    running: dict[str, CodeDispatchStart] = {}
    open_turn: int | None = None
    open_step: tuple[int, int] | None = None
    for event in events:
        if isinstance(event, ToolCall):
            pending[event.call_id] = event
        elif isinstance(event, ToolResult):
            pending.pop(event.call_id, None)
        elif isinstance(event, CodeDispatchStart):
            if open_turn is not None:
                running[event.sub_call_id] = event
        elif isinstance(event, CodeDispatch):
            running.pop(event.sub_call_id, None)
        elif isinstance(event, TurnStart):
            open_turn = event.turn
            running.clear()
        elif isinstance(event, TurnEnd):
            open_turn = None
            open_step = None
            running.clear()
        elif isinstance(event, StepStart):
            open_step = (event.turn, event.step)
        elif isinstance(event, StepEnd):
            open_step = None
    repairs: list[Event] = []
    text = f"Error: {OUTCOME_UNKNOWN_MESSAGE}"
    for start in running.values():
        repairs.append(
            CodeDispatch(
                root_call_id=start.root_call_id,
                parent_call_id=start.parent_call_id,
                sub_call_id=start.sub_call_id,
                name=start.name,
                arguments=start.arguments,
                is_error=True,
                content=({"type": "text", "text": text},),
                code="TOOL_OUTCOME_UNKNOWN",
            )
        )
    for call in pending.values():
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
