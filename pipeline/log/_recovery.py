"""Crash repair on open (docs/pipeline-spec.md §10): balance every dangling call, close open
turns."""

from __future__ import annotations

import msgspec

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
    ToolResumed,
    ToolSuspended,
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
    - then every open step of the open turn gets its ``step/end`` (concurrent batches
      overlap steps), in the order they opened, and the open turn ``turn/end`` (reason
      ``"interrupted"``);
    - a run whose latest ``tool/resumed`` never got as far as its resuming ``tool/call``
      (the process died in between) has its suspension logged again, unchanged: nothing of
      that resumption ran, so its approvals were not used. (A resuming call that did start
      is answered ``TOOL_OUTCOME_UNKNOWN`` above, which gives its suspension back too.)

    A start left unsettled in a turn that was closed anyway (or outside any turn) cannot
    be settled in place; ``check`` reports it.

    Returns an empty list for a clean log.
    """
    pending: dict[str, ToolCall] = {}
    running: dict[str, CodeDispatchStart] = {}
    open_turn: int | None = None
    open_steps: dict[int, None] = {}        # the open turn's open steps, in opening order
    suspensions: dict[str, ToolSuspended] = {}   # run id -> its latest suspension
    resuming: dict[str, str] = {}           # run id -> the call id of its latest resumption
    called: set[str] = set()
    for event in events:
        if isinstance(event, ToolCall):
            pending[event.call_id] = event
            called.add(event.call_id)
        elif isinstance(event, ToolResult):
            pending.pop(_answered(event), None)
        elif isinstance(event, CodeDispatchStart):
            if open_turn is not None:
                running[event.sub_call_id] = event
        elif isinstance(event, CodeDispatch):
            running.pop(event.sub_call_id, None)
        elif isinstance(event, TurnStart):
            open_turn = event.turn
            open_steps = {}
            running.clear()
        elif isinstance(event, TurnEnd):
            open_turn = None
            open_steps = {}
            running.clear()
        elif isinstance(event, StepStart):
            if event.turn == open_turn:
                open_steps[event.step] = None
        elif isinstance(event, StepEnd):
            if event.turn == open_turn:
                open_steps.pop(event.step, None)
        elif isinstance(event, ToolSuspended):
            suspensions[event.run_id] = event
            resuming.pop(event.run_id, None)
        elif isinstance(event, ToolResumed):
            resuming[event.run_id] = event.call_id
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
    if open_turn is not None:
        repairs.extend(StepEnd(turn=open_turn, step=step) for step in open_steps)
        repairs.append(TurnEnd(turn=open_turn, reason="interrupted"))
    for run_id, call_id in resuming.items():
        suspension = suspensions.get(run_id)
        if suspension is not None and call_id not in called:
            repairs.append(msgspec.structs.replace(suspension, seq=0, time=0.0))
    return repairs


def _answered(result: ToolResult) -> str:
    """The call id a result answers ("" for a result with no block: it answers none)."""
    blocks = result.message.content
    return blocks[0].tool_call_id if blocks else ""
