"""`RunReport`: how one `codemode run` ended, as data (`codemode run --json` prints it).

The report is built from what the run produced, never from message text:

    RunOutcome (the sandbox)        ok, kind, code, limit, stdout, stderr, value, error
    the session log + observer      subcalls (one row per sub-call, in submission order)

A paused run (its program waits on calls needing approval; docs/codemode.md "Pausing for
approval") is not a failure but did not complete: `ok` is false, `kind` "pending", and
`approvals` lists what it waits on. A resumed run's sub-calls include the ones answered
from the log (`replayed_from` names the sub-call whose outcome answered them).

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
    ProgramTooLarge       limit           size        code
    RunAborted            aborted         abort       null
    (TypeCheckFailed)     type_error      type-check  null
    RunPaused             pending         paused      null
    ReplayDiverged        replay_diverged replay-diverged null
    (RESUME_TAMPERED)     resume_tampered resume-tampered null
    GuestCrashed          sandbox_error   trap        null
    HostDispatchFailed    sandbox_error   dispatch    null
    (no outcome)          sandbox_error   runtime     null
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from codemode._run.output import cut_json
from codemode.pipeline import CallResult, events
from codemode.sandbox import (
    FuelExhausted,
    GuestCrashed,
    HostDispatchFailed,
    MemoryLimitExceeded,
    OutputLimitExceeded,
    ProgramError,
    ProgramTooLarge,
    ReplayDiverged,
    RunAborted,
    RunError,
    RunOutcome,
    RunPaused,
    SandboxLimits,
    SubcallLimitExceeded,
    TimeLimitExceeded,
)

from .._run.typecheck import TypeCheckError, format_errors, summary

Kind = Literal["ok", "program_error", "limit", "aborted", "sandbox_error", "pending",
               "replay_diverged", "resume_tampered", "type_error"]
Limit = Literal["time", "fuel", "memory", "output", "subcalls", "code"]

_ENDINGS: dict[type[RunError], tuple[Kind, Limit | None]] = {
    ProgramError: ("program_error", None),
    TimeLimitExceeded: ("limit", "time"),
    FuelExhausted: ("limit", "fuel"),
    MemoryLimitExceeded: ("limit", "memory"),
    OutputLimitExceeded: ("limit", "output"),
    SubcallLimitExceeded: ("limit", "subcalls"),
    ProgramTooLarge: ("limit", "code"),
    RunAborted: ("aborted", None),
    RunPaused: ("pending", None),
    ReplayDiverged: ("replay_diverged", None),
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
        duration_ms: milliseconds from its start to its commit; null if it never started
            (and for a call answered from the log).
        replayed_from: for a resumed run's call answered from the log without running
            again, the sub-call id whose recorded outcome answered it; else null.
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
    replayed_from: str | None = None


class ApprovalReport(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call a paused run waits on.

    Attributes:
        id: the request id, `"<run id>:<n>"` (`n` as in `subcalls`); a decision names it.
        tool: the tool's name.
        arguments: the arguments the program sent (JSON).
        reason: why it needs approval (the policy rule's reason), or null.
    """

    id: str
    tool: str
    arguments: Any
    reason: str | None


class RunReport(msgspec.Struct, frozen=True, kw_only=True):
    """How one run ended; every field is always present (see the module docstring).

    Attributes:
        ok: the program completed (false for a paused run too).
        kind: "ok", "program_error", "limit", "aborted", "sandbox_error", "pending" (paused,
            waiting for approval) or "replay_diverged" (a resumed program did not repeat the
            paused run) or "resume_tampered" (the paused run's record was changed after it
            paused: nothing ran).
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
        run_id: the run's id (its first `run_code` call id; the same across resumptions):
            `codemode resume LOG RUN_ID` goes on with a paused run.
        approvals: what a paused run waits on (`ApprovalReport`s, in call order); empty
            unless kind is "pending".
        labels: the labels the run holds (docs/codemode.md "Labels"): for each label, the
            sub-call ids whose results brought it; empty when it holds none.
        warnings: what the host's dependencies or the policy warned about during the run
            (an MCP server's notification the SDK could not validate, a rule's glob that
            matches no tool), one line each; under `--json` instead of on stderr.
        cut: what the sandbox cut at its output limit, as the run's value says
            (`{"part": "stdout" | "stderr" | "value", "kept_bytes", "total_bytes"}` each);
            empty when nothing was.
        type_errors: what the type check found before the run (`TypeCheckError`s: line,
            column, end_line, end_column, rule, message); with kind "type_error" the
            program did not run ("enforce"), else it ran anyway ("warn").
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
    run_id: str
    approvals: tuple[ApprovalReport, ...]
    labels: dict[str, list[str]] = {}
    warnings: tuple[str, ...] = ()
    cut: tuple[dict[str, Any], ...] = ()
    type_errors: tuple[TypeCheckError, ...] = ()


class Rejection(msgspec.Struct, frozen=True):
    """What a failed sub-call's result said, recorded by a `tools/result` observer."""

    code: str
    denied: bool


def build_report(*, outcome: RunOutcome | None, failure: BaseException | None,
                 result: CallResult, log_events: Sequence[events.Event],
                 rejections: Mapping[str, Rejection], exposed: Collection[str],
                 duration_s: float, limits: SandboxLimits, run_id: str,
                 labels: Mapping[str, Sequence[str]] | None = None,
                 type_errors: Sequence[TypeCheckError] = (), source: str = "") -> RunReport:
    """The report of the last `run_code` call in `log_events` (a run, or a resumption).

    Args:
        outcome: what the sandbox returned, None when it raised (`failure`).
        failure: what the sandbox raised instead (`SandboxUnavailable`), else None.
        result: the `run_code` call's result (consulted when it failed after a good run,
            and for the approvals a paused run waits on).
        log_events: the session log, read after the call.
        rejections: failed sub-calls by sub-call id, as the observer saw them.
        exposed: names of the tools exposed to the run.
        duration_s: seconds the `run_code` call took.
        limits: the limits the run had.
        run_id: the run's id (the first call's id, the same for its resumptions).
        labels: the labels the run held (`CodeMode.labels`; a failed run's too); None: those
            of the result's value.
        type_errors: what the type check found (`CodeMode.type_errors`).
        source: the program (the lines a refused program's errors point at).
    """
    subcalls = _subcalls(log_events, rejections, exposed)
    common: dict[str, Any] = {"subcalls": subcalls, "duration_s": duration_s,
                              "limits": limits, "run_id": run_id, "approvals": (),
                              "labels": _labels(result) if labels is None else
                              {str(k): [str(i) for i in v] for k, v in labels.items()},
                              "type_errors": tuple(type_errors)}
    detail = result.error if result.is_error else None
    if detail is not None and detail.code == "REPLAY_DIVERGED":
        # Found by the dispatcher (another call) or by the tape (another clock read): either
        # way the resumed run stopped before any tool ran past that point.
        stdout = outcome.stdout if outcome is not None else ""
        stderr = outcome.stderr if outcome is not None else ""
        return RunReport(ok=False, kind="replay_diverged", code="replay-diverged", limit=None,
                         stdout=stdout, stderr=stderr, value=None,
                         error=ErrorReport(type="ReplayDiverged", message=detail.message),
                         **common)
    if detail is not None and detail.code == "RESUME_TAMPERED":     # refused before any run
        return RunReport(ok=False, kind="resume_tampered", code="resume-tampered", limit=None,
                         stdout="", stderr="", value=None,
                         error=ErrorReport(type="ResumeTampered", message=detail.message),
                         **common)
    if outcome is None and detail is not None and type_errors:   # refused before any run
        return RunReport(ok=False, kind="type_error", code="type-check", limit=None,
                         stdout="", stderr="", value=None,
                         error=ErrorReport(type="TypeCheckFailed",
                                           message=summary(type_errors) + "; the program "
                                           "did not run and no tool was called",
                                           traceback=format_errors(source, type_errors)),
                         **common)
    if outcome is None:               # the run failed before its sandbox: say why, when known
        if failure is not None:
            error = ErrorReport(type=type(failure).__name__, message=str(failure))
        elif detail is not None:
            error = ErrorReport(type=detail.info.name if detail.info else "CallFailed",
                                message=detail.message)
        else:
            error = ErrorReport(type="RuntimeError", message="the sandbox did not run")
        return RunReport(ok=False, kind="sandbox_error", code="runtime", limit=None,
                         stdout="", stderr="", value=None, error=error, **common)
    value = None if outcome.value is UNSET else outcome.value
    common.update(stdout=outcome.stdout, stderr=outcome.stderr, cut=tuple(cut_json(outcome)))
    if outcome.error is not None:
        kind, limit = _ENDINGS.get(type(outcome.error), ("sandbox_error", None))
        error = ErrorReport(type=getattr(outcome.error, "type", type(outcome.error).__name__),
                            message=outcome.error.message,
                            traceback=getattr(outcome.error, "traceback", ""))
        if kind == "pending" and result.is_error and detail is not None:
            # it paused, but the pause could not be recorded (a seal key refused): it failed
            return RunReport(ok=False, kind="sandbox_error", code="runtime", limit=None,
                             value=None, error=ErrorReport(
                                 type=detail.info.name if detail.info else "CallFailed",
                                 message=detail.message), **common)
        if kind == "pending":
            common["approvals"] = _approvals(result)
        return RunReport(ok=False, kind=kind, code=outcome.error.kind, limit=limit,
                         value=None, error=error, **common)
    if result.is_error:                 # the program completed; run_code failed after it
        return RunReport(ok=False, kind="sandbox_error",
                         code=(detail.code if detail else None) or "runtime", limit=None,
                         value=None,
                         error=ErrorReport(type="CallFailed",
                                           message=detail.message if detail else result.text),
                         **common)
    return RunReport(ok=True, kind="ok", code=None, limit=None, value=value,
                     error=None, **common)


def _labels(result: CallResult) -> dict[str, list[str]]:
    """The labels a `run_code` value holds (`{"labels": {label: [sub-call ids]}}`)."""
    value = result.value if not result.is_error else None
    labels = value.get("labels") if isinstance(value, Mapping) else None
    if not isinstance(labels, Mapping):
        return {}
    return {str(label): [str(i) for i in ids] for label, ids in labels.items()}


def _approvals(result: CallResult) -> tuple[ApprovalReport, ...]:
    """The requests of a pending `run_code` value (`{"status": "pending", "approvals"}`)."""
    value = result.value if not result.is_error else None
    if not isinstance(value, Mapping):
        return ()
    return tuple(ApprovalReport(id=str(a["id"]), tool=str(a["toolName"]),
                                arguments=a.get("arguments"), reason=a.get("reason"))
                 for a in value.get("approvals", ()))


def _subcalls(log_events: Sequence[events.Event], rejections: Mapping[str, Rejection],
              exposed: Collection[str]) -> tuple[SubcallReport, ...]:
    calls = [e for e in log_events if isinstance(e, events.ToolCall)]
    if not calls:
        return ()
    root = calls[-1].call_id                                # this run's run_code call
    ours = [e for e in log_events if getattr(e, "root_call_id", None) == root]
    starts = {e.sub_call_id: e for e in ours if isinstance(e, events.CodeDispatchStart)}
    settled = {e.sub_call_id: e for e in log_events if isinstance(e, events.CodeDispatch)}
    rows = []
    for event in ours:
        if isinstance(event, events.CodeReplayed):
            rows.append(_replayed_row(event, settled.get(event.replayed_from)))
            continue
        if not isinstance(event, events.CodeDispatch):
            continue
        start = starts.get(event.sub_call_id)
        rejection = rejections.get(event.sub_call_id)
        code = None
        if event.is_error and rejection is not None:
            code = rejection.code
        elif event.is_error and isinstance(event.code, str):
            code = event.code
        elif event.is_error:                    # made by the dispatcher (module docstring)
            code = "ABORTED" if event.name in exposed else "UNKNOWN_TOOL"
        rows.append(SubcallReport(
            n=_n(event.sub_call_id), id=event.sub_call_id,
            tool=event.name, arguments=event.arguments, ok=not event.is_error, code=code,
            denied=bool(event.is_error and (code == "DENIED" or (
                rejection is not None and rejection.denied))),
            text=_text(event.content),
            duration_ms=None if start is None else round((event.time - start.time) * 1000, 3)))
    return tuple(sorted(rows, key=lambda row: row.n))


def _replayed_row(event: events.CodeReplayed,
                  original: events.CodeDispatch | None) -> SubcallReport:
    """A resumed run's call answered from the log: the outcome its original call logged."""
    failed = original is not None and original.is_error
    code = (original.code if original is not None and isinstance(original.code, str)
            else "TOOL_ERROR") if failed else None
    return SubcallReport(
        n=_n(event.sub_call_id), id=event.sub_call_id, tool=event.name,
        arguments=event.arguments, ok=not failed, code=code, denied=code == "DENIED",
        text=_text(original.content) if original is not None else "", duration_ms=None,
        replayed_from=event.replayed_from)


def _n(sub_call_id: str) -> int:
    return int(sub_call_id.rsplit(":", 1)[-1])


def _text(content: Sequence[Any]) -> str:
    return "\n".join(b.get("text", "") for b in content
                     if isinstance(b, dict) and b.get("type") == "text")
