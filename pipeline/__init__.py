"""Generic tool-execution pipeline (docs/design.md §5, docs/pipeline-spec.md). Imports neither
codemode
nor sandbox.

Every tool call — direct from the model or from a sandboxed program — runs through one
``Session``: pre-execute waterfall, approval, guards, execute wrappers, the body,
post-execute waterfall, normalization, ``finalize_content``, ``tools/result``. Session
events live in ``codemode.pipeline.events`` and are persisted by a ``codemode.pipeline.log``
backend.

The file-store guard (``FsGate``, ``FileStore``, ...) and the execute wrappers
(``retry_wrapper``, ``timeout_wrapper``) load on first use (PEP 562): a session that uses
neither does not import them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import events, log
from ._approval import (
    APPROVAL_OUTCOMES,
    ApprovalAnswer,
    ApprovalChannel,
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalService,
)
from ._content import default_render
from ._decisions import Accept, Allow, Ask, Block, Deny
from ._definition import ToolDefinition, tool
from ._eager import launch
from ._errors import (
    AbortedBeforeDispatchError,
    AbortedError,
    ApprovalError,
    ApprovalPendingError,
    DuplicateToolError,
    FsError,
    FsNotFoundError,
    FsNotObservedError,
    FsStaleVersionError,
    HarnessError,
    HookError,
    InvalidArgumentsError,
    InvalidToolOutputError,
    LogClosedError,
    LogCorruptError,
    LogError,
    LogInUseError,
    LogInvariantError,
    NotLosslessError,
    OutcomeUnknownError,
    RegistrationError,
    ReservedToolError,
    ResumeError,
    ToolExitError,
    ToolTimeoutError,
    UnknownToolError,
)
from ._execution import DispatchExecution, Execution, ExecutionInput, ExecutionToken, RunContext
from ._lazy import lazy_exports as _lazy_exports
from ._lossless import FrozenDict, FrozenList, snapshot, thaw
from ._normalize import message_of
from ._pending import PendingCall
from ._result import CallResult, ToolErrorDetail
from ._resume import Resumption
from ._scheduler import CallState, Scheduled, Scheduler, eager
from ._schema import validate
from ._session import POINTS, Session
from ._signal import Signal
from .events import ApprovalDecision, ErrorInfo, PendingApproval
from .log import SessionLog, open_log

if TYPE_CHECKING:  # `X as X`: re-exported for type checkers, which do not run __getattr__
    from ._fs_guard import CreateIfAbsent as CreateIfAbsent
    from ._fs_guard import FileStore as FileStore
    from ._fs_guard import FsGate as FsGate
    from ._fs_guard import ReplaceIfVersion as ReplaceIfVersion
    from ._fs_guard import Unconditional as Unconditional
    from ._fs_guard import read_before_edit as read_before_edit
    from ._wrappers import retry_wrapper as retry_wrapper
    from ._wrappers import timeout_wrapper as timeout_wrapper

# name -> the private module that defines it
_LAZY = {
    **dict.fromkeys(("CreateIfAbsent", "FileStore", "FsGate", "ReplaceIfVersion",
                     "Unconditional", "read_before_edit"), "._fs_guard"),
    **dict.fromkeys(("retry_wrapper", "timeout_wrapper"), "._wrappers"),
}

__all__ = [
    "APPROVAL_OUTCOMES",
    "POINTS",
    "AbortedBeforeDispatchError",
    "AbortedError",
    "Accept",
    "Allow",
    "ApprovalAnswer",
    "ApprovalChannel",
    "ApprovalDecision",
    "ApprovalError",
    "ApprovalOutcome",
    "ApprovalPendingError",
    "ApprovalRequest",
    "ApprovalService",
    "Ask",
    "Block",
    "CallResult",
    "CallState",
    "CreateIfAbsent",
    "Deny",
    "DispatchExecution",
    "DuplicateToolError",
    "ErrorInfo",
    "Execution",
    "ExecutionInput",
    "ExecutionToken",
    "FileStore",
    "FrozenDict",
    "FrozenList",
    "FsError",
    "FsGate",
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
    "PendingApproval",
    "PendingCall",
    "RegistrationError",
    "ReplaceIfVersion",
    "ReservedToolError",
    "ResumeError",
    "Resumption",
    "RunContext",
    "Scheduled",
    "Scheduler",
    "Session",
    "SessionLog",
    "Signal",
    "ToolDefinition",
    "ToolErrorDetail",
    "ToolExitError",
    "ToolTimeoutError",
    "Unconditional",
    "UnknownToolError",
    "default_render",
    "eager",
    "events",
    "launch",
    "log",
    "message_of",
    "open_log",
    "read_before_edit",
    "retry_wrapper",
    "snapshot",
    "thaw",
    "timeout_wrapper",
    "tool",
    "validate",
]


__getattr__, __dir__ = _lazy_exports(__name__, globals(), _LAZY, __all__)
