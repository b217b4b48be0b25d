"""Binding rejections: how a sub-call the host did not carry out reaches the program.

    ToolCallError            any rejected sub-call (attributes tool_name, message, code)
    ├── ToolDenied           policy, guard or approval said no            code DENIED
    ├── ToolArgumentError    arguments failed the tool's schema, or the   code INVALID_ARGS
    │                        call did not fit its signature (also a TypeError)
    ├── ToolNotFound         no tool of that name is exposed to the run   code UNKNOWN_TOOL
    └── ToolError            the tool itself failed                       code TOOL_ERROR
                             (or raised SystemExit & co.)                 code TOOL_EXITED

Catching one does not make the call succeed: the host has already recorded the rejection.
Codes without a class of their own (ABORTED, TOOL_TIMEOUT, HOOK_FAILED: a policy hook
broke, TOOL_OUTCOME_UNKNOWN: the call was abandoned, ...) keep their code on a plain
ToolCallError. docs/pipeline-spec.md §11.5.
"""


class ToolCallError(Exception):
    """A sub-call the host did not carry out."""

    code = "TOOL_CALL_FAILED"

    def __init__(self, tool_name, message, code=None):
        super().__init__(f"{tool_name}: {message}")
        self.tool_name = tool_name
        self.message = message
        if code is not None:
            self.code = code


class ToolDenied(ToolCallError):
    code = "DENIED"


class ToolArgumentError(ToolCallError, TypeError):
    code = "INVALID_ARGS"


class ToolNotFound(ToolCallError):
    code = "UNKNOWN_TOOL"


class ToolError(ToolCallError):
    code = "TOOL_ERROR"


_BY_CODE = {c.code: c for c in (ToolDenied, ToolArgumentError, ToolNotFound, ToolError)}
_BY_CODE["TOOL_EXITED"] = ToolError     # still the tool's own failure, whatever it raised


def rejection(tool_name, code, message):
    """The exception for one failed outcome: the subclass for `code`, else ToolCallError."""
    return _BY_CODE.get(code, ToolCallError)(tool_name, message, code)


class LimitReached(BaseException):
    """A limit the guest enforces itself (output bytes, sub-call budget) fired.

    A BaseException so that `except Exception` in the program does not swallow it; the
    runtime records the limit before raising, so even a bare `except:` cannot undo it.
    """

    def __init__(self, limit, message):
        super().__init__(message)
        self.limit = limit
