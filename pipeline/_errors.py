"""Typed errors of the pipeline, each with a stable ``code`` (docs/pipeline-spec.md §5).

The tree::

    HarnessError                      code (class attribute), name (reported as info.name)
     ├── UnknownToolError             UNKNOWN_TOOL
     ├── InvalidArgumentsError        INVALID_ARGS
     ├── InvalidToolOutputError       INVALID_TOOL_OUTPUT
     ├── ToolTimeoutError             TOOL_TIMEOUT
     ├── AbortedError                 ABORTED                  (name "AbortError")
     │    └── AbortedBeforeDispatchError  ABORTED_BEFORE_DISPATCH
     ├── ApprovalError                APPROVAL_FAILED
     ├── ApprovalPendingError         APPROVAL_PENDING the approval was deferred: nobody has
     │                                             answered yet (the body never ran)
     ├── ResumeError                  RESUME_FAILED    ``Session.resume`` cannot resume a run
     ├── HookError                    HOOK_FAILED  a listener, wrapper, guard or hook failed
     │                                             (not the tool: its body never ran)
     ├── ToolExitError                TOOL_EXITED  the body raised a BaseException that is not
     │                                             an Exception (SystemExit, ...): contained
     ├── OutcomeUnknownError          TOOL_OUTCOME_UNKNOWN (name "ToolOutcomeUnknown")
     ├── RegistrationError            REGISTRATION_FAILED
     │    ├── DuplicateToolError      DUPLICATE_TOOL
     │    └── ReservedToolError       RESERVED_TOOL
     ├── FsError                      (filesystem gate, docs/pipeline-spec.md §9)
     │    ├── FsNotObservedError      FS_NOT_OBSERVED
     │    ├── FsStaleVersionError     FS_STALE_VERSION
     │    └── FsNotFoundError         FS_NOT_FOUND
     └── LogError                     LOG_ERROR
          ├── LogCorruptError         LOG_CORRUPT (names the file and the line/row)
          ├── LogClosedError          LOG_CLOSED
          ├── LogInUseError           LOG_IN_USE
          └── LogInvariantError       LOG_INVARIANT (an append the log refuses; .violation)

    NotLosslessError (ValueError)     no code: "… must be losslessly JSON-serializable"

Only a ``HarnessError`` gives a failed result structured ``info = {name, code}``; any other
exception keeps just its message. Codes are part of the persisted log: never rename one.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "AbortedBeforeDispatchError",
    "AbortedError",
    "ApprovalError",
    "ApprovalPendingError",
    "DuplicateToolError",
    "FsError",
    "FsNotFoundError",
    "FsNotObservedError",
    "FsStaleVersionError",
    "HarnessError",
    "HookError",
    "InvalidArgumentsError",
    "InvalidToolOutputError",
    "LogClosedError",
    "LogCorruptError",
    "LogError",
    "LogInUseError",
    "LogInvariantError",
    "NotLosslessError",
    "OutcomeUnknownError",
    "RegistrationError",
    "ReservedToolError",
    "ResumeError",
    "ToolExitError",
    "ToolTimeoutError",
    "UnknownToolError",
]


class HarnessError(Exception):
    """Base of every typed pipeline error.

    Attributes:
        code: stable machine-readable code (class attribute; an instance may override it).
        name: the error name persisted as ``info.name`` (defaults to the class name).
        message: the bare human-readable reason (also ``str(error)``).
    """

    code: str = "HARNESS_ERROR"
    error_name: str | None = None

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    @property
    def name(self) -> str:
        return self.error_name or type(self).__name__


class UnknownToolError(HarnessError):
    code = "UNKNOWN_TOOL"

    @classmethod
    def naming(cls, name: str, known: Iterable[str]) -> UnknownToolError:
        """``unknown tool "<name>"``, then ``; did you mean "a" or "b"?`` with the (up to
        three) names of ``known`` closest to ``name`` (``difflib.get_close_matches``, cutoff
        0.6), when any is. ``known`` must hold only names the caller may reach: whatever it
        holds may be shown."""
        import difflib  # only an unknown name needs it

        close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
        quoted = " or ".join(f'"{c}"' for c in close)
        hint = f"; did you mean {quoted}?" if close else ""
        return cls(f'unknown tool "{name}"{hint}')


class InvalidArgumentsError(HarnessError):
    code = "INVALID_ARGS"


class InvalidToolOutputError(HarnessError):
    code = "INVALID_TOOL_OUTPUT"


class ToolTimeoutError(HarnessError):
    code = "TOOL_TIMEOUT"


class AbortedError(HarnessError):
    code = "ABORTED"
    error_name = "AbortError"


class AbortedBeforeDispatchError(AbortedError):
    code = "ABORTED_BEFORE_DISPATCH"


class ApprovalError(HarnessError):
    code = "APPROVAL_FAILED"


class ApprovalPendingError(HarnessError):
    """The call needs an approval that was deferred (``Ask(defer=True)``, or a Code-Mode
    run with no approver): it did not run, and the caller stops to ask later."""

    code = "APPROVAL_PENDING"


class ResumeError(HarnessError):
    """``Session.resume`` refused: no suspended call with that run id, already resumed,
    decisions that do not match the pending requests, or a tool that cannot resume."""

    code = "RESUME_FAILED"


class HookError(HarnessError):
    """A ``tools/pre-execute`` or ``tools/post-execute`` listener, a ``tools/execute``
    wrapper, a guard or a hook bridge raised, or answered something that is not a decision.
    The call fails on the final route (docs/pipeline-spec.md §5) with this code, so neither
    the model nor a program mistakes it for a failure of the tool, which did not run (or whose
    result was then lost)."""

    code = "HOOK_FAILED"


class ToolExitError(HarnessError):
    """The tool body raised a ``BaseException`` that is not an ``Exception``: ``SystemExit``
    (``sys.exit``, ``argparse`` on bad input), ``KeyboardInterrupt``, ``GeneratorExit`` or a
    class of its own. It is contained like any failure: the host keeps running."""

    code = "TOOL_EXITED"


class OutcomeUnknownError(HarnessError):
    """Nobody knows whether the call took effect: the session stopped while it ran (crash
    repair, docs/pipeline-spec.md §10), or a sub-call was abandoned while its body still ran."""

    code = "TOOL_OUTCOME_UNKNOWN"
    error_name = "ToolOutcomeUnknown"


class RegistrationError(HarnessError):
    code = "REGISTRATION_FAILED"


class DuplicateToolError(RegistrationError):
    code = "DUPLICATE_TOOL"


class ReservedToolError(RegistrationError):
    code = "RESERVED_TOOL"


class FsError(HarnessError):
    code = "FS_ERROR"


class FsNotObservedError(FsError):
    code = "FS_NOT_OBSERVED"


class FsStaleVersionError(FsError):
    code = "FS_STALE_VERSION"


class FsNotFoundError(FsError):
    code = "FS_NOT_FOUND"


class LogError(HarnessError):
    code = "LOG_ERROR"


class LogCorruptError(LogError):
    """A stored event cannot be decoded. ``path`` and ``position`` say where.

    ``position`` is a 1-based line number for JSONL and the row's ``seq`` for SQLite.
    """

    code = "LOG_CORRUPT"

    def __init__(self, path: str, position: int, detail: str, *, unit: str = "line") -> None:
        super().__init__(f"corrupt session log {path!s} at {unit} {position}: {detail}")
        self.path = path
        self.position = position
        self.detail = detail


class LogClosedError(LogError):
    code = "LOG_CLOSED"


class LogInUseError(LogError):
    """Another session or process is writing the same log file."""

    code = "LOG_IN_USE"


class LogInvariantError(LogError):
    """The log refused an append that would break one of its invariants (docs/pipeline-spec.md §10),
    such as a ``tool/result`` for a call nobody made or a dispatch event outside a turn.

    Attributes:
        violation: the ``codemode.pipeline.log.Violation`` (kind, seq, message).
    """

    code = "LOG_INVARIANT"

    def __init__(self, violation: object, message: str) -> None:
        super().__init__(message)
        self.violation = violation


class NotLosslessError(ValueError):
    """A value is not lossless JSON (docs/pipeline-spec.md §1.1). Carries no code on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
