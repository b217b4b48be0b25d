"""OpenTelemetry spans for a session's tool calls (docs/integrations.md). Needs the `otel`
extra (the OpenTelemetry API); spans go wherever the tracer provider sends them.

    from codemode.telemetry import instrument
    dispose = instrument(session)            # before policies: see every decision

One span per call, named `execute_tool <tool>` (kind INTERNAL), from `tools/pre-execute`
to `tools/result` (so it covers policy, approval, guards, the body and post-execute). A
top-level call's span is a child of the span current where `session.call` was awaited;
a sub-call's span is a child of its `run_code` call's span, in the same trace.

Attributes, after the GenAI semantic conventions:

    gen_ai.operation.name     "execute_tool"
    gen_ai.tool.name          the tool name
    gen_ai.tool.call.id       the call id (a sub-call's is "<run_code call id>:code:<n>")
    gen_ai.tool.type          "function"

and ours:

    codemode.root_call_id     the top-level call the span belongs to
    codemode.agent            the calling agent, when there is one
    codemode.code             `run_code` only: the program (cut to `max_code_chars`)
    codemode.limits.<field>   `run_code` only: the run's `SandboxLimits` (wall_clock_s, ...)
    codemode.labels           `run_code` only, when its run holds labels (a failed run's
                              too): their names, sorted (a string array;
                              docs/codemode.md "Labels")
    codemode.outcome          "ok" | "error" | "denied" | "limit"
    codemode.error.code       on failure: DENIED, UNKNOWN_TOOL, CODE_RUN_FAILED, ...
    codemode.limit            on "limit": which one (timeout, fuel, memory, output, subcalls)
    error.type                on failure: the same code

A success leaves the status unset; a failure, a denial or a limit sets status ERROR with
the failure message's first line as description.

Instrumenting only listens (a `tools/pre-execute` listener that always delegates and a
`tools/result` observer): it changes no decision and no result. A listener registered
before it that decides without delegating hides the call's start; such a call still gets
a span, started when its result is published.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from codemode.pipeline import CallResult, Execution, Session

from ._version import codemode_version

__all__ = ["LIMIT_KINDS", "instrument"]

LIMIT_KINDS = frozenset({"timeout", "fuel", "memory", "output", "subcalls", "size"})
"""The `code run failed (<kind>)` kinds that are limits (docs/codemode.md)."""

_KIND = re.compile(r"^code run failed \((?P<kind>[a-z]+)\)")
_TRACER = "codemode"


def instrument(session: Session, *, tracer_provider: Any = None,
               max_code_chars: int = 4096) -> Callable[[], None]:
    """Record a span per tool call of `session` (see the module docstring).

    Args:
        session: the session to observe.
        tracer_provider: where spans go (default: the global provider).
        max_code_chars: how much of a program `codemode.code` keeps.
    Returns:
        A disposer that stops recording (idempotent); spans already open end when their
        calls do.
    """
    tracer = trace.get_tracer(_TRACER, codemode_version(), tracer_provider=tracer_provider)
    open_spans: dict[str, Span] = {}            # call id -> its span, until its result
    by_token: dict[Any, Span] = {}              # execution token -> span (sub-call parents)

    def start(execution: Execution, start_ns: int | None = None) -> Span:
        parent = by_token.get(execution.parent) if execution.parent is not None else None
        context = trace.set_span_in_context(parent) if parent is not None else None
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": execution.name,
            "gen_ai.tool.call.id": execution.call_id,
            "gen_ai.tool.type": "function",
            "codemode.root_call_id": execution.root_call_id,
        }
        if execution.agent is not None:
            attributes["codemode.agent"] = execution.agent
        if execution.name == session.reserved_name:
            attributes.update(_run_attributes(session, execution.arguments, max_code_chars))
        span = tracer.start_span(f"execute_tool {execution.name}", context=context,
                                 kind=SpanKind.INTERNAL, attributes=attributes,
                                 start_time=start_ns)
        open_spans[execution.call_id] = span
        by_token[execution.token] = span
        return span

    async def on_pre_execute(execution: Execution, next: Callable[[], Any]) -> Any:
        if execution.call_id not in open_spans:
            start(execution)
        return await next()

    def on_result(execution: Execution, result: CallResult) -> None:
        span = open_spans.pop(execution.call_id, None)
        if span is None:
            span = start(execution, time.time_ns())
            open_spans.pop(execution.call_id, None)
        by_token.pop(execution.token, None)
        _finish(span, result, _failed_run_labels(session, execution, result))

    disposers = [session.on("tools/pre-execute", on_pre_execute),
                 session.on("tools/result", on_result)]

    def dispose() -> None:
        for undo in disposers:
            undo()

    return dispose


def _run_attributes(session: Session, arguments: Any, max_code_chars: int) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    code = arguments.get("code") if isinstance(arguments, dict) else None
    if isinstance(code, str):
        attributes["codemode.code"] = code[:max_code_chars]
    limits = _limits_of(session)
    if limits is not None:
        for name in limits.__struct_fields__:
            value = getattr(limits, name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                attributes[f"codemode.limits.{name}"] = value
    return attributes


def _code_mode_of(session: Session) -> Any:
    """The `CodeMode` that reserved `run_code` on the session, or None."""
    from ._run.run_code import CodeMode

    reserved = session.resolve(session.reserved_name)
    owner = getattr(reserved.execute, "__self__", None) if reserved is not None else None
    return owner if isinstance(owner, CodeMode) else None


def _limits_of(session: Session) -> Any:
    """The limits of the `CodeMode` that reserved `run_code` on the session, if any."""
    mode = _code_mode_of(session)
    return mode.limits if mode is not None else None


def _failed_run_labels(session: Session, execution: Execution,
                       result: CallResult) -> dict[str, Any] | None:
    """The labels a failed `run_code` run held (`CodeMode.labels`): its span's status text
    may quote what the program printed of labelled data, so the span says so too."""
    if not result.is_error or execution.name != session.reserved_name:
        return None
    mode = _code_mode_of(session)
    return mode.labels(execution.call_id) if mode is not None else None


def _finish(span: Span, result: CallResult, failed_labels: dict[str, Any] | None = None) -> None:
    labels = result.value.get("labels") if not result.is_error \
        and isinstance(result.value, dict) else failed_labels
    if isinstance(labels, dict) and labels:             # a run_code value (a FrozenDict)
        span.set_attribute("codemode.labels", sorted(str(label) for label in labels))
    if not result.is_error:
        span.set_attribute("codemode.outcome", "ok")
        span.end()
        return
    error = result.error
    message = error.message if error is not None else "failed"
    if result.denied:
        outcome, code = "denied", "DENIED"
    else:
        code = error.code if error is not None and error.code is not None else "TOOL_ERROR"
        kind = _KIND.match(message)
        outcome = "limit" if kind is not None and kind["kind"] in LIMIT_KINDS else "error"
        if outcome == "limit":
            assert kind is not None
            span.set_attribute("codemode.limit", kind["kind"])
    span.set_attribute("codemode.outcome", outcome)
    span.set_attribute("codemode.error.code", code)
    span.set_attribute("error.type", code)
    span.set_status(Status(StatusCode.ERROR, message.split("\n", 1)[0]))
    span.end()


