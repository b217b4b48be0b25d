"""What the model reads of a run: the `run_code` value as text, a paused run's requests,
and the message of a run that failed (docs/pipeline-spec.md §11).

Separate from `run_code` (which makes the value): this only words it, each stream bounded by
`MODEL_TEXT_CHARS` while the value itself keeps everything the sandbox returned.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from codemode.sandbox import RunOutcome

from .output import cut_line
from .paging import paging_line
from .typecheck import TypeCheckError, warned
from .visible import visible

MODEL_TEXT_CHARS = 20_000
"""Characters of one stream (stdout, stderr, the value, a traceback) in the text the model
reads; past it the head and the tail are kept and the cut is marked with its size. The
tool's value keeps everything the sandbox returned."""


def _bounded(text: str, limit: int = MODEL_TEXT_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"


def shown_request(request: Any, argument_chars: int | None = None) -> str:
    """An approval request (`{"toolName", "arguments", "reason"?}`) as one line a person is
    shown, `tool(arguments) (reason)`, with nothing in it that could hide or reorder text
    (`visible`); the arguments cut at `argument_chars` when given."""
    arguments = json.dumps(request.get("arguments"), ensure_ascii=False)
    if argument_chars is not None:
        arguments = _bounded(arguments, argument_chars)
    reason = f" ({request['reason']})" if request.get("reason") else ""
    return visible(f"{request.get('toolName')}({arguments}){reason}", lines=False)


def _render_pending(value: dict[str, Any]) -> list[dict[str, Any]]:
    """A paused run: what it waits on, and that it goes on by itself once decided."""
    approvals = value.get("approvals", [])
    lines = [f"The program is paused (run {value.get('run_id')}): {len(approvals)} tool call"
             f"{'s need' if len(approvals) != 1 else ' needs'} a person's approval:"]
    for request in approvals:        # the model may show these lines to the person deciding
        lines.append(f"- {shown_request(request, 500)} [request {request.get('id')}]")
    lines.append("When they are decided the program resumes where it stopped and its result "
                 "arrives; do not run it again.")
    if value.get("labels"):
        lines.append(_labels_line(value["labels"]))
    logs = "".join(value.get("logs", ()))
    if logs:
        lines.append("Output so far:\n" + _bounded(logs.rstrip("\n")))
    return [{"type": "text", "text": "\n".join(lines)}]


def _render(args: Any, value: Any) -> list[dict[str, Any]]:
    """Logs, then stderr, then the result (strings raw, other JSON pretty-printed; a None
    result is not echoed), each bounded by `MODEL_TEXT_CHARS`, then the summary, the labels
    and the type errors of a run checked with "warn". A pending value (a paused run) lists
    the approvals it waits on."""
    if value.get("status") == "pending":
        return _render_pending(value)
    parts: list[str] = []
    logs = "".join(value.get("logs", ()))
    if logs:
        parts.append(_bounded(logs.rstrip("\n")))
    stderr = value.get("stderr", "")
    if stderr:
        parts.append("stderr:\n" + _bounded(stderr.rstrip("\n")))
    result = value.get("result")
    if isinstance(result, str):
        parts.append(_bounded(result))
    elif isinstance(result, (dict, list)):
        parts.append(_bounded(json.dumps(result, indent=2, ensure_ascii=False)))
    elif result is not None:
        # a number or a bool holds no text to escape: json's shared default encoder, with no
        # encoder made for it (indent would only shape containers)
        parts.append(_bounded(json.dumps(result)))
    if not parts:
        # A final expression of None is kept in the value (`"result": null`) but, as in
        # Python's REPL, not echoed after output; alone, it is said in words.
        parts.append("(the program completed with no output; its last expression was None)"
                     if "result" in value else "(the program completed with no output)")
    if value.get("cut"):
        parts.append(cut_line(value["cut"]))
        if value.get("output_handle"):
            parts.append(paging_line(value["output_handle"], value["cut"][0]["part"]))
    summary = value.get("subcalls") or {}
    if summary.get("total"):
        line = f"[{summary['total']} tool call{'s' if summary['total'] != 1 else ''}"
        if summary.get("failed"):
            line += f", {summary['failed']} failed ({summary.get('denied', 0)} denied)"
        parts.append(line + "]")
    if value.get("labels"):
        parts.append(_labels_line(value["labels"]))
    if value.get("type_errors"):         # type_check = "warn": found, and run anyway
        errors = msgspec.convert(value["type_errors"], list[TypeCheckError])
        code = args.get("code", "") if isinstance(args, dict) else ""
        parts.append(_bounded(warned(code, errors)))
    return [{"type": "text", "text": "\n".join(parts)}]


def _labels_line(labels: Any) -> str:
    """`[labels: private from r1:code:1; untrusted from r1:code:2, r1:code:3]`: what the run
    holds, in the text the model reads and the log keeps."""
    return "[labels: " + "; ".join(f"{label} from {', '.join(ids)}"
                                   for label, ids in labels.items()) + "]"


def _failure_message(outcome: RunOutcome) -> str:
    error = outcome.error
    kind = error.kind if error is not None else "unknown"
    detail = error.message if error is not None else "unknown failure"
    traceback = getattr(error, "traceback", "")
    message = f"code run failed ({kind}): {detail}"
    if traceback:
        message += "\n\n" + _bounded(traceback.rstrip("\n"))
    if outcome.stdout.rstrip("\n"):
        message += "\n\nCaptured output:\n" + _bounded(outcome.stdout.rstrip("\n"))
    if outcome.stderr.rstrip("\n"):
        message += "\n\nstderr:\n" + _bounded(outcome.stderr.rstrip("\n"))
    return message
