"""`RunReport`: how one `codemode run` ended, as data (`codemode run --json` prints it).

The report is built from what the run produced, never from message text:

    RunOutcome (the sandbox)        ok, kind, code, limit, stdout, stderr, value, error
    the session log + observer      subcalls (one row per sub-call, in submission order)

A failed sub-call's code is what a `tools/result` observer saw (`rejection_code`). The
dispatcher makes two failures without running the pipeline, so no observer sees them: a
name not exposed to the run (`UNKNOWN_TOOL`) and a call the run's end cut off (`ABORTED`).

`kind` is the coarse class a script branches on; `code` is the stable name of the ending
(the `<kind>` of `code run failed (<kind>): ...`); `limit` names the limit that fired:

    RunError class        kind            code        limit
    (none: ok)            ok              null        null
    ProgramError          program_error   exception   null
    TimeLimitExceeded     limit           timeout     time
    FuelExhausted         limit           fuel        fuel
    MemoryLimitExceeded   limit           memory      memory
    OutputLimitExceeded   limit           output      output
    SubcallLimitExceeded  limit           subcalls    subcalls
    RunAborted            aborted         abort       null
    GuestCrashed          sandbox_error   trap        null
    HostDispatchFailed    sandbox_error   dispatch    null
    (no outcome)          sandbox_error   runtime     null
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from codemode.pipeline import CallResult, events
from codemode.sandbox import (
    FuelExhausted,
    GuestCrashed,
    HostDispatchFailed,
    MemoryLimitExceeded,
    OutputLimitExceeded,
    ProgramError,
    RunAborted,
    RunError,
    RunOutcome,
    SandboxLimits,
    SubcallLimitExceeded,
    TimeLimitExceeded,
)

Kind = Literal["ok", "program_error", "limit", "aborted", "sandbox_error"]
Limit = Literal["time", "fuel", "memory", "output", "subcalls"]

_ENDINGS: dict[type[RunError], tuple[Kind, Limit | None]] = {
    ProgramError: ("program_error", None),
    TimeLimitExceeded: ("limit", "time"),
    FuelExhausted: ("limit", "fuel"),
    MemoryLimitExceeded: ("limit", "memory"),
    OutputLimitExceeded: ("limit", "output"),
    SubcallLimitExceeded: ("limit", "subcalls"),
    RunAborted: ("aborted", None),
    GuestCrashed: ("sandbox_error", None),
    HostDispatchFailed: ("sandbox_error", None),
}


class ErrorReport(msgspec.Struct, frozen=True, kw_only=True):
    """Why the run did not complete.

    Attributes:
        type: the exception's class name for a program error ("ValueError"), else the
            sandbox's error class ("TimeLimitExceeded", "SandboxUnavailable", ...).
        message: for people; not stable.
        traceback: the program's own frames (program errors only), else "".
    """

    type: str
    message: str
    traceback: str = ""


class SubcallReport(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call the program made, as it settled.

    Attributes:
        n: 1, 2, ... in the order the program made the calls.
        id: the sub-call id, `"<run_code call id>:code:<n>"` (as in the session log).
        tool: the tool's name.
        arguments: the arguments as sent (JSON).
        ok: the call succeeded.
        code: the code the program's `ToolCallError` carried ("DENIED", "UNKNOWN_TOOL",
            "INVALID_ARGS", "TOOL_ERROR", "ABORTED", ...); null when ok.
        denied: a policy, guard or approval refused the call (code "DENIED").
        text: the call's final content as text (its text blocks joined by newlines).
        duration_ms: milliseconds from its start to its commit; null if it never started.
    """

    n: int
    id: str
    tool: str
    arguments: Any
    ok: bool
    code: str | None
    denied: bool
    text: str
    duration_ms: float | None


class RunReport(msgspec.Struct, frozen=True, kw_only=True):
    """How one run ended; every field is always present (see the module docstring).

    Attributes:
        ok: the program completed.
        kind: "ok", "program_error", "limit", "aborted" or "sandbox_error".
        code: the stable name of the ending, null when ok.
        limit: the limit that ended the run, null unless kind is "limit".
        stdout, stderr: what the program printed, each cut at the output limit with a
            marker line; kept on failure too.
        value: the final expression's value as JSON, null when there was none or it was None;
            a value JSON cannot hold exactly (a tuple, a set, bytes, -0.0, a big int, a dict
            with non-string keys, ...) comes as a one-key tagged object such as
            `{"$tuple": [1, 2]}` (docs/sandbox.md; `codemode.sandbox.decode_value`).
        error: why the run did not complete, null when ok.
        subcalls: the program's tool calls, in order.
        duration_s: seconds from the start of the `run_code` call to its result.
        limits: the limits the run had (`sandbox.SandboxLimits`; units in the field names).
    """

    ok: bool
    kind: Kind
    code: str | None
    limit: Limit | None
    stdout: str
    stderr: str
    value: Any
    error: ErrorReport | None
    subcalls: tuple[SubcallReport, ...]
    duration_s: float
    limits: SandboxLimits


class Rejection(msgspec.Struct, frozen=True):
    """What a failed sub-call's result said, recorded by a `tools/result` observer."""

    code: str
    denied: bool


def build_report(*, outcome: RunOutcome | None, failure: BaseException | None,
                 result: CallResult, log_events: Sequence[events.Event],
                 rejections: Mapping[str, Rejection], exposed: Collection[str],
                 duration_s: float, limits: SandboxLimits) -> RunReport:
    """The report of the last `run_code` call in `log_events`.

    Args:
        outcome: what the sandbox returned, None when it raised (`failure`).
        failure: what the sandbox raised instead (`SandboxUnavailable`), else None.
        result: the `run_code` call's result (consulted when it failed after a good run).
        log_events: the session log, read after the call.
        rejections: failed sub-calls by sub-call id, as the observer saw them.
        exposed: names of the tools exposed to the run.
        duration_s: seconds the `run_code` call took.
        limits: the limits the run had.
    """
    subcalls = _subcalls(log_events, rejections, exposed)
    if outcome is None:
        error = ErrorReport(type=type(failure).__name__ if failure else "RuntimeError",
                            message=str(failure) if failure else "the sandbox did not run")
        return RunReport(ok=False, kind="sandbox_error", code="runtime", limit=None,
                         stdout="", stderr="", value=None, error=error,
                         subcalls=subcalls, duration_s=duration_s, limits=limits)
    value = None if outcome.value is UNSET else outcome.value
    common: dict[str, Any] = {"stdout": outcome.stdout, "stderr": outcome.stderr,
                              "subcalls": subcalls, "duration_s": duration_s, "limits": limits}
    if outcome.error is not None:
        kind, limit = _ENDINGS.get(type(outcome.error), ("sandbox_error", None))
        error = ErrorReport(type=getattr(outcome.error, "type", type(outcome.error).__name__),
                            message=outcome.error.message,
                            traceback=getattr(outcome.error, "traceback", ""))
        return RunReport(ok=False, kind=kind, code=outcome.error.kind, limit=limit,
                         value=None, error=error, **common)
    if result.is_error:                 # the program completed; run_code failed after it
        detail = result.error
        return RunReport(ok=False, kind="sandbox_error",
                         code=(detail.code if detail else None) or "runtime", limit=None,
                         value=None,
                         error=ErrorReport(type="CallFailed",
                                           message=detail.message if detail else result.text),
                         **common)
    return RunReport(ok=True, kind="ok", code=None, limit=None, value=value,
                     error=None, **common)


def _subcalls(log_events: Sequence[events.Event], rejections: Mapping[str, Rejection],
              exposed: Collection[str]) -> tuple[SubcallReport, ...]:
    calls = [e for e in log_events if isinstance(e, events.ToolCall)]
    if not calls:
        return ()
    root = calls[-1].call_id                                # this run's run_code call
    ours = [e for e in log_events if getattr(e, "root_call_id", None) == root]
    starts = {e.sub_call_id: e for e in ours if isinstance(e, events.CodeDispatchStart)}
    rows = []
    for event in ours:
        if not isinstance(event, events.CodeDispatch):
            continue
        start = starts.get(event.sub_call_id)
        rejection = rejections.get(event.sub_call_id)
        code = None
        if event.is_error and rejection is not None:
            code = rejection.code
        elif event.is_error:                    # made by the dispatcher (module docstring)
            code = "ABORTED" if event.name in exposed else "UNKNOWN_TOOL"
        rows.append(SubcallReport(
            n=int(event.sub_call_id.rsplit(":", 1)[-1]), id=event.sub_call_id,
            tool=event.name, arguments=event.arguments, ok=not event.is_error, code=code,
            denied=bool(event.is_error and rejection is not None and rejection.denied),
            text="\n".join(b.get("text", "") for b in event.content
                           if isinstance(b, dict) and b.get("type") == "text"),
            duration_ms=None if start is None else round((event.time - start.time) * 1000, 3)))
    return tuple(sorted(rows, key=lambda row: row.n))
