"""What one pending call holds across its phases: its input and execution, its route and
result, the phase it is in, and the few steps every phase takes (settling the outcome,
resolving the tool again, checking the frozen arguments, ``abandon``).

The phases (``_admission``, ``_dispatch``, ``_commit``) each add their methods to this
state; ``PendingCall`` (``_pending``) is the three together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ._definition import ToolDefinition
from ._errors import AbortedBeforeDispatchError, AbortedError, HookError, UnknownToolError
from ._execution import Execution, ExecutionInput
from ._normalize import failure_from
from ._result import CallResult
from ._signal import Signal

if TYPE_CHECKING:     # the registry makes pending calls: it imports this module, not back
    from ._registry import ToolRegistry

__all__ = ["ABORTED_BEFORE_DISPATCH_MESSAGE", "ABORTED_MESSAGE", "PendingState", "Route",
           "aborted"]

Route = Literal["dispatch", "post", "final"]

ABORTED_MESSAGE = "tool call aborted"
ABORTED_BEFORE_DISPATCH_MESSAGE = "tool call aborted before dispatch"


def aborted(before_dispatch: bool, contexts: tuple[Any, ...] = ()) -> CallResult:
    """The failure of a call its caller aborted, before or after its body was invoked."""
    error: AbortedError = (
        AbortedBeforeDispatchError(ABORTED_BEFORE_DISPATCH_MESSAGE)
        if before_dispatch
        else AbortedError(ABORTED_MESSAGE)
    )
    return failure_from(error, additional_contexts=contexts)


class PendingState:
    """One call in flight, as its phases share it (see ``PendingCall``)."""

    __slots__ = ("_abandoned", "_arguments_json", "_concludes", "_core_made", "_deferred",
                 "_finalizer", "_input", "_needs_policy", "_own", "_phase", "_published",
                 "_registry", "_seen", "_wrapped", "body_invoked", "caller", "execution",
                 "result", "route")

    def __init__(self, registry: ToolRegistry, inp: ExecutionInput) -> None:
        self._registry = registry
        self._input = inp
        self.caller: Signal = inp.signal
        self.route: Route = "dispatch"
        self.result: CallResult | None = None
        self.body_invoked = False
        self._finalizer: Callable[..., Any] | None = None
        self._deferred: list[Any] = []
        self._concludes = False
        self._core_made: list[tuple[CallResult, bytes | None]] = []
        # Results this call froze itself (S9 success, S10 deferred contexts) that no
        # listener could write through unseen: S12 needs not copy them again.
        self._own: list[CallResult] = []
        self._arguments_json = b"null"
        self._phase = "new"
        self._needs_policy = False
        self._abandoned = False
        self._published: CallResult | None = None
        self._wrapped = False
        # A listener or a guard was handed the execution: only then can its frozen
        # arguments have been written through during policy (checked again before the body,
        # whoever held it since).
        self._seen = False
        self.execution: Execution = None  # type: ignore[assignment]

    # -- helpers ------------------------------------------------------------------------
    def _resolve(self) -> ToolDefinition | None:
        """The definition the call's name reaches now (``None``: unknown, not among the
        input's ``reachable`` names, or, for a direct call, not among the session's direct
        tools, ``Session.set_direct_tools``)."""
        inp = self._input
        if inp.reachable is not None and inp.name not in inp.reachable:
            return None
        if inp.parent is None and not self._registry.direct_reach(inp.name):
            return None
        return self._registry.resolve(inp.name, inp.agent)

    def _unknown_tool(self) -> UnknownToolError:
        """``UNKNOWN_TOOL`` for this call's name, suggesting the closest names it could
        have reached: for a direct call, what the model is offered; for a sub-call, the
        visible tools; either narrowed to ``reachable``. A name hidden from the caller is
        never among them."""
        inp, reg = self._input, self._registry
        known = reg.offered(inp.agent) if inp.parent is None else reg.visible(inp.agent)
        names = [d.name for d in known if inp.reachable is None or d.name in inp.reachable]
        return UnknownToolError.naming(inp.name, names)

    def _settle(self, route: Route, result: CallResult) -> None:
        if self._abandoned:  # a stage finishing after abandon(): its outcome is discarded
            return
        self.route = route
        self.result = result

    @property
    def phase(self) -> str:
        """``"created"`` (S3 done), ``"started"`` (S4–S7 begun), ``"dispatched"`` (S8–S10
        begun or skipped), ``"committing"`` or ``"committed"``."""
        return self._phase

    @property
    def published(self) -> CallResult | None:
        """The result ``tools/result`` observers received, once committed."""
        return self._published

    @property
    def abandoned(self) -> bool:
        """Whether ``abandon`` settled this call."""
        return self._abandoned

    def abandon(self, error: BaseException) -> None:
        """Stop waiting for this call, whatever stage it is in (policy, wrappers, body,
        post-execute; that stage may go on running). Its outcome becomes the failure for
        ``error`` on the final route, so ``commit()`` finalizes and publishes it at once;
        whatever the running stage produces later is discarded. Used for a sub-call that
        did not stop when its run ended (``TOOL_OUTCOME_UNKNOWN``). No-op once committed.

        """
        if self._phase == "committed":
            return
        self._settle("final", failure_from(error))
        self._abandoned = True
        self._phase = "dispatched"

    @property
    def _scopes(self) -> tuple[str | None, ...]:
        return self._registry.scopes(self.execution.agent)

    def _arguments_changed(self, suspect: str) -> CallResult | None:
        """``None`` if the frozen arguments still encode to the bytes taken at S3, else the
        ``HOOK_FAILED`` failure naming ``suspect``. Frozen containers refuse their own
        mutators, but ``dict.__setitem__(args, ...)`` gets past them: without this check
        the body would run with arguments other than the ones logged and judged."""
        try:
            same = msgspec.json.encode(self.execution.arguments) == self._arguments_json
        except Exception:
            same = False
        if same:
            return None
        return failure_from(HookError(
            f"{suspect} changed the frozen arguments of this call; it was not run"))
