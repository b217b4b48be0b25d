"""Which binding rejection a failed sub-call becomes in the program (docs/design.md §4).

    denial (pre-execute, approval, guard, post-execute block)  -> ToolDenied       DENIED
    UNKNOWN_TOOL                                                -> ToolNotFound
    INVALID_ARGS                                                -> ToolArgumentError
    a tool that raised                                          -> ToolError        TOOL_ERROR
    any other code (ABORTED, TOOL_TIMEOUT, ...)                 -> ToolCallError, code kept
"""

from codemode.pipeline import CallResult


def rejection_code(result: CallResult) -> str:
    """The stable code the program's `ToolCallError` carries for a failed `result`."""
    error = result.error
    if error is None:
        return "TOOL_ERROR"
    if error.info is not None:
        return error.info.code
    return "DENIED" if result.denied else "TOOL_ERROR"
