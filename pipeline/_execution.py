"""Execution input, the registry-owned execution view, and the body's ``RunContext``
(docs/pipeline-spec.md §1.2, §1.3)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from ._signal import Signal

if TYPE_CHECKING:
    from ._definition import ToolDefinition

__all__ = ["DispatchExecution", "Execution", "ExecutionInput", "ExecutionToken", "RunContext"]


class ExecutionToken:
    """Opaque identity of one execution; compared by identity, never serialized."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<ExecutionToken {id(self):#x}>"

    def __reduce__(self) -> Any:
        raise TypeError("an ExecutionToken cannot be serialized")

    def __copy__(self) -> ExecutionToken:
        return self

    def __deepcopy__(self, memo: Any) -> ExecutionToken:
        return self


class ExecutionInput(msgspec.Struct, frozen=True):
    """What a caller asks the registry to run.

    Args:
        call_id: non-empty id of this call (``"<outer>:code:<n>"`` for Code-Mode sub-calls).
        name: the tool name as requested (not checked here: unknown names fail at dispatch).
        arguments: parsed arguments (any object; snapshotted as lossless JSON at S3).
        signal: the caller's cancellation signal (required).
        root_call_id: the enclosing top-level call; ``None`` for a top-level call.
        agent: the calling agent, or ``None``.
        parent: the enclosing execution's ``ExecutionToken`` (sub-calls), else ``None``.
        reachable: the names this call may resolve (a Code-Mode run's exposed tools);
            ``None``: every tool visible to ``agent``. Any other name goes through policy
            like a name visible nowhere and fails ``UNKNOWN_TOOL`` at dispatch.
        argument_error: why the caller found the call malformed before it got here (a
            program's call that did not fit the tool's signature); the call fails
            ``INVALID_ARGS`` (``invalid arguments: <why>``) at S3, before policy, like a call
            whose arguments break the tool's schema: no policy, wrapper or body; the
            finalizer and ``tools/result`` still run. ``None``: nothing found.
        approval: the channel that answers this call's ``Ask`` instead of the session's (a
            Code-Mode run routes its sub-calls' approvals through its own, which may defer
            them); with one, a call without an agent is routed too. ``None``: the session's.
        idempotency_key: a key stable across retries and replays of this call (a sub-call's
            is ``"<run id>:<n>"``), handed to the body as ``RunContext.idempotency_key``.
        resumption: what ``Session.resume`` hands the body of a resumed call (the
            ``Resumption``); ``None`` for a fresh call. Never from the model's arguments.
    """

    call_id: str
    name: str
    arguments: Any
    signal: Signal
    root_call_id: str | None = None
    agent: str | None = None
    parent: Any = None
    reachable: frozenset[str] | None = None
    argument_error: str | None = None
    approval: Any = None
    idempotency_key: str | None = None
    resumption: Any = None


class Execution(msgspec.Struct, frozen=True, kw_only=True):
    """The read-only execution every stage sees.

    ``arguments`` is the frozen lossless snapshot (``None`` when the arguments could not be
    snapshotted); ``signal`` is the caller's signal (fused with the calling task's own
    cancellation); ``definition`` is the definition visible at S3 (``None``: unknown name).
    """

    call_id: str
    root_call_id: str
    name: str
    arguments: Any
    agent: str | None
    parent: Any
    token: ExecutionToken
    signal: Signal
    definition: ToolDefinition | None = None
    idempotency_key: str | None = None
    resumption: Any = None


class DispatchExecution:
    """The view given to ``tools/execute`` wrappers: like ``Execution`` but ``signal`` may
    be replaced (with another ``Signal``; never removed) for the wrapper's delegated
    lifetime. The registry fuses the caller's signal into whatever is installed."""

    __slots__ = ("_execution", "_signal")
    _execution: Execution
    _signal: Signal

    def __init__(self, execution: Execution) -> None:
        object.__setattr__(self, "_execution", execution)
        object.__setattr__(self, "_signal", execution.signal)

    @property
    def execution(self) -> Execution:
        return self._execution

    @property
    def signal(self) -> Signal:
        return self._signal

    @signal.setter
    def signal(self, value: Signal) -> None:
        if not isinstance(value, Signal):
            raise TypeError("the execution's signal can only be replaced by another Signal")
        self._signal = value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._execution, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("_execution", "_signal", "signal"):
            object.__setattr__(self, name, value)
        else:
            raise AttributeError(f"execution field {name!r} is read-only")

    def __repr__(self) -> str:
        return f"<DispatchExecution {self._execution.name} {self._execution.call_id}>"


class RunContext:
    """What a tool body gets besides its arguments.

    Attributes:
        execution: the read-only ``Execution``.
        signal: the fused signal (caller's cancellation plus any wrapper deadline): observe it.
        idempotency_key: a key that stays the same when this call is retried or replayed
            (``"<run id>:<n>"`` for the n-th sub-call of a Code-Mode run); a tool that has side
            effects can use it to apply each effect once. ``None`` for a direct call.
        resumption: the ``Resumption`` when ``Session.resume`` resumed this call, else ``None``.
    """

    __slots__ = ("_conclude", "_defer", "execution", "signal")

    def __init__(
        self,
        execution: Execution,
        signal: Signal,
        defer: Callable[[Any], None],
        conclude: Callable[[], None],
    ) -> None:
        self.execution = execution
        self.signal = signal
        self._defer = defer
        self._conclude = conclude

    @property
    def idempotency_key(self) -> str | None:
        return self.execution.idempotency_key

    @property
    def resumption(self) -> Any:
        return self.execution.resumption

    def defer_context(self, message: Any) -> None:
        """Attach a user-role message (a string or a list of content blocks) to this call's
        eventual result; delivered after the result (docs/pipeline-spec.md §8). Raises
        ``NotLosslessError`` at once for a malformed message."""
        self._defer(message)

    def conclude_turn(self) -> None:
        """Mark a successful result as ending the agent turn (ignored on failure)."""
        self._conclude()

    def __repr__(self) -> str:
        return f"<RunContext {self.execution.name} {self.execution.call_id}>"
