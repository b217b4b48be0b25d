"""`codemode log show FILE`: a session log's calls as a tree (call -> sub-calls), with
outcomes, codes, durations and approvals; `--json` for the same as data. On a terminal a
long argument list is cut to its width; piped or redirected, every line is whole.

The log is read with `codemode.pipeline.log.load`, without being opened for writing: no
lock is taken and no crash repair is written, so a log another process is still appending
to can be shown (its calls in flight show as "running").

A node (the `--json` shape, camelCase like the log):

    {"callId", "name", "arguments",
     "status": "ok" | "error" | "denied" | "running" | "paused" | "waiting",
     "code"?: stable error code, "message"?: the error's first line,
     "startedAt": Unix time in seconds, "durationMs"?: number,
     "approvals": [{"reason"?, "outcome"?, "by"?}], "subcalls": [node, ...],
     "runId"?: the run a paused or resuming call belongs to,
     "pending"?: [request id, ...]  (a paused call: the approvals it waits on),
     "resumedBy"?: call id  (a paused call that was resumed: the resuming call),
     "decisions"?: [{"id", "approved", "reason"?}]  (a resuming call: what it was given),
     "replayedFrom"?: sub-call id  (answered from the log without running again),
     "lookup"?: true  (a discovery or read_output call the host answered: no tool ran)}

Pausing for approval (docs/codemode.md): a `run_code` call that returned a pending result
is "paused"; its sub-calls whose approval was deferred are "waiting" (code
APPROVAL_PENDING). The call that resumed it (`<run id>:resume:<k>`) is a call of its own,
with the decisions it was given; its sub-calls answered from the log show the status of
the sub-call they replay and `replayedFrom`.

A denial is a failed call whose last approval was not granted, or a sub-call whose code
is DENIED. Sub-call events carry the code of the rejection the program got; in a log
written before they did, a failed sub-call's code is derived from its approvals or left
out.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import typer

from codemode.pipeline import LogError, events
from codemode.pipeline.log import load, torn_tail

from ._console import terminal_width

__all__ = ["CallNode", "build_tree", "render_tree", "show"]

_ARGUMENT_CHARS = 80


@dataclass
class CallNode:
    """One call (top-level or sub-call) of the tree; `to_json()` is the `--json` shape."""

    call_id: str
    name: str
    arguments: Any
    started_at: float
    status: str = "running"
    code: str | None = None
    message: str | None = None
    ended_at: float | None = None
    approvals: list[dict[str, Any]] = field(default_factory=list)
    subcalls: list[CallNode] = field(default_factory=list)
    run_id: str | None = None
    pending: list[str] | None = None
    resumed_by: str | None = None
    decisions: list[dict[str, Any]] | None = None
    replayed_from: str | None = None
    lookup: bool = False

    @property
    def duration_ms(self) -> float | None:
        return None if self.ended_at is None else (self.ended_at - self.started_at) * 1000

    def to_json(self) -> dict[str, Any]:
        node: dict[str, Any] = {"callId": self.call_id, "name": self.name,
                                "arguments": self.arguments, "status": self.status}
        if self.code is not None:
            node["code"] = self.code
        if self.message is not None:
            node["message"] = self.message
        node["startedAt"] = self.started_at
        if self.duration_ms is not None:
            node["durationMs"] = round(self.duration_ms, 3)
        node["approvals"] = list(self.approvals)
        node["subcalls"] = [child.to_json() for child in self.subcalls]
        extra = {"runId": self.run_id, "pending": self.pending, "resumedBy": self.resumed_by,
                 "decisions": self.decisions, "replayedFrom": self.replayed_from}
        node.update({k: v for k, v in extra.items() if v is not None})
        if self.lookup:
            node["lookup"] = True
        return node

    def _settle(self, is_error: bool, content: Any, time: float, code: str | None) -> None:
        self.ended_at = time
        if not is_error:
            self.status = "paused" if self.pending is not None else "ok"
            return
        if code == "APPROVAL_PENDING":
            self.status, self.code, self.message = "waiting", code, _first_line(content)
            return
        denied = code == "DENIED" or (code is None and bool(self.approvals)
                                      and self.approvals[-1].get("outcome") != "allowed-once")
        self.status = "denied" if denied else "error"
        self.code = "DENIED" if denied else code
        self.message = _first_line(content)


def build_tree(log: list[events.Event]) -> list[CallNode]:
    """The top-level calls of a log, in log order, each with its sub-calls in order."""
    roots: list[CallNode] = []
    nodes: dict[str, CallNode] = {}
    approvals: dict[str, dict[str, Any]] = {}
    resumptions: dict[str, events.ToolResumed] = {}       # resuming call id -> its event
    paused: dict[str, CallNode] = {}                      # run id -> its latest paused call
    for event in log:
        match event:
            case events.ToolCall(call_id=call_id, name=name, arguments=text, time=time):
                node = CallNode(call_id, name, _parse(text), time)
                nodes[call_id] = node
                roots.append(node)
                resumed = resumptions.pop(call_id, None)
                if resumed is not None:
                    node.run_id = resumed.run_id
                    node.decisions = [msgspec.to_builtins(d) for d in resumed.decisions]
            case events.ToolSuspended(run_id=run_id, call_id=call_id, requests=requests) \
                    if call_id in nodes:
                node = nodes[call_id]
                node.run_id, node.pending = run_id, [r.id for r in requests]
                paused[run_id] = node
            case events.ToolResumed(run_id=run_id, call_id=call_id):
                resumptions[call_id] = event
                if run_id in paused:
                    paused[run_id].resumed_by = call_id
            case events.CodeReplayed(sub_call_id=call_id, parent_call_id=parent, name=name,
                                     arguments=arguments, replayed_from=source, time=time):
                node = CallNode(call_id, name, arguments, time, replayed_from=source)
                original = nodes.get(source)
                if original is not None:
                    node.status, node.code = original.status, original.code
                    node.message = original.message
                nodes[call_id] = node
                (nodes[parent].subcalls if parent in nodes else roots).append(node)
            case events.CodeLookup(sub_call_id=call_id, parent_call_id=parent, name=name,
                                   arguments=arguments, is_error=is_error, code=failed,
                                   time=time):
                node = CallNode(call_id, name, arguments, time, lookup=True, ended_at=time,
                                status="error" if is_error else "ok",
                                code=failed if isinstance(failed, str) else None)
                (nodes[parent].subcalls if parent in nodes else roots).append(node)
            case events.CodeDispatchStart(sub_call_id=call_id, parent_call_id=parent, name=name,
                                          arguments=arguments, time=time):
                node = CallNode(call_id, name, arguments, time)
                nodes[call_id] = node
                if parent in nodes:
                    nodes[parent].subcalls.append(node)
                else:                              # the parent's start was not logged
                    roots.append(node)
            case events.CodeDispatch(sub_call_id=call_id, is_error=is_error, content=content,
                                     time=time, code=sub_code) if call_id in nodes:
                nodes[call_id]._settle(is_error, content, time,
                                       sub_code if isinstance(sub_code, str) else None)
            case events.ToolResult(message=message, error=error, time=time):
                for block in message.content:
                    if block.tool_call_id in nodes:
                        code = error.code if isinstance(error, events.ErrorInfo) else None
                        nodes[block.tool_call_id]._settle(block.is_error, block.content, time,
                                                          code)
            case events.ApprovalAsked(id=approval_id, call_id=call_id, reason=reason) \
                    if isinstance(call_id, str) and call_id in nodes:
                asked: dict[str, Any] = {} if reason is msgspec.UNSET else {"reason": reason}
                approvals[approval_id] = asked
                nodes[call_id].approvals.append(asked)
            case events.ApprovalDecided(id=approval_id, outcome=outcome, by=by) \
                    if approval_id in approvals:
                approvals[approval_id]["outcome"] = outcome
                if isinstance(by, str):
                    approvals[approval_id]["by"] = by
            case _:
                pass
    return roots


def render_tree(roots: list[CallNode], width: int | None = None) -> str:
    """The tree as text, one line per call::

        run_code "order total" · ok · 152 ms
        ├── list_orders(customer="ada@example.com") · ok · 3 ms
        └── sleep_ms(ms=5) · denied · 0 ms · approval: rejected · the user rejected ...

    A call is shown as `name(arguments)` (JSON values), or as `name "description"` when its
    arguments carry a description (`run_code`'s title). With a `width` (a terminal's, in
    columns), arguments are cut with `…` so that `name(arguments)` fits it (at least
    `_ARGUMENT_CHARS` characters of them are kept); without one, nothing is cut.
    """
    lines: list[str] = []

    def walk(node: CallNode, lead: str, branch: str) -> None:
        room = None if width is None else max(
            _ARGUMENT_CHARS, width - len(lead + branch) - len(node.name) - 2)
        lines.append(lead + branch + _line(node, room))
        inner = lead + ("    " if branch == "└── " else "│   " if branch else "")
        for index, child in enumerate(node.subcalls):
            walk(child, inner, "└── " if index == len(node.subcalls) - 1 else "├── ")

    for root in roots:
        walk(root, "", "")
    return "\n".join(lines)


def _line(node: CallNode, room: int | None) -> str:
    titled = isinstance(node.arguments, dict) and isinstance(node.arguments.get("description"), str)
    head = (f"{node.name} \"{node.arguments['description']}\"" if titled
            else f"{node.name}({_arguments(node.arguments, room)})")
    parts = [head, node.status]
    if node.code is not None and node.code != node.status.upper():
        parts[-1] += f" {node.code}"
    if node.duration_ms is not None:
        parts.append(f"{node.duration_ms:.0f} ms")
    for approval in node.approvals:
        by = f" by {approval['by']}" if "by" in approval else ""
        parts.append(f"approval: {approval.get('outcome', 'pending')}{by}")
    if node.replayed_from is not None:
        parts.append(f"replayed from {node.replayed_from}")
    if node.lookup:
        parts.append("answered by the host")
    if node.pending is not None:
        parts.append(f"run {node.run_id} waits for approval of {', '.join(node.pending)}")
        parts.append(f"resumed by {node.resumed_by}" if node.resumed_by else "not resumed")
    if node.decisions is not None:
        decided = [f"{'approved' if d['approved'] else 'denied'} {d['id']}"
                   + (f" ({d['reason']})" if d.get("reason") else "") for d in node.decisions]
        parts.append(f"resumes run {node.run_id}: {', '.join(decided)}")
    if node.message is not None:
        parts.append(node.message)
    return " · ".join(parts)


def _arguments(arguments: Any, room: int | None) -> str:
    """`k=<JSON>, ...` on one line, cut to `room` characters (None: whole)."""
    if isinstance(arguments, dict):
        text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    else:
        text = json.dumps(arguments, ensure_ascii=False)
    text = " ".join(text.split())
    return text if room is None or len(text) <= room else text[:room - 1] + "…"


def _parse(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return text


def _first_line(content: Any) -> str | None:
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            text = str(block.get("text", "")).removeprefix("Error: ")
            return text.split("\n", 1)[0]
    return None


def show(file: Path, as_json: bool = False) -> None:
    """`codemode log show FILE [--json]` (`_log.py` declares it): print the log's calls
    as a tree (call -> sub-calls) with outcomes, codes, durations and approvals, or as JSON.

    Raises:
        typer.Exit: 2, after printing why, when the log cannot be read."""
    try:
        roots = build_tree(load(file))
    except (OSError, ValueError, LogError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    say_torn(file)
    if as_json:
        typer.echo(json.dumps({"calls": [r.to_json() for r in roots]}, ensure_ascii=False,
                              indent=2))
    elif roots:       # cut to a terminal's width; whole into a pipe or a file
        typer.echo(render_tree(roots, terminal_width(sys.stdout)))
    else:
        typer.echo("(no calls)")


def say_torn(file: Path) -> None:
    """Say on stderr that the log's torn last line was left out (`torn_tail`), if it has one."""
    size = torn_tail(file)
    if size:
        typer.echo(f"note: {file}: the last line ({size} bytes) is torn and was left out: a "
                   "write in progress, or a writer that died mid-append (opening the log for "
                   "writing drops it)", err=True)
