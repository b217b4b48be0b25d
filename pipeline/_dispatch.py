"""A call's dispatch, S8–S10 (docs/pipeline-spec.md §2): the ``tools/execute`` wrappers
around the core, the tool's body under the fused signal, the value made into a frozen
result, and the normalization of whatever the wrappers return.

Separate from admission and commit: this is the one phase of a call that overlaps with
other calls' (a batch's pool, a program's concurrent sub-calls).
"""

from __future__ import annotations

import inspect
from typing import Any

import msgspec

from ._content import freeze_contexts
from ._deadline import within_deadline
from ._errors import HookError, InvalidArgumentsError, InvalidToolOutputError
from ._execution import DispatchExecution, RunContext
from ._materialize import fingerprint, rebuild_failure, success
from ._normalize import body_failure, failure_from, listener_failure, shown_traceback
from ._pending_state import PendingState, aborted
from ._result import CallResult
from ._shield import own_cancellation
from ._signal import Signal

__all__ = ["DispatchPhase"]


class DispatchPhase(PendingState):
    """S8–S10 (``dispatch``)."""

    __slots__ = ()

    async def dispatch(self) -> None:
        """S8–S10 (no-op unless the route is ``dispatch``)."""
        if self._phase != "started":
            raise RuntimeError(f"{self!r}: dispatch() called in phase {self._phase!r}")
        self._phase = "dispatched"
        if self.route != "dispatch":
            return
        if self._input.argument_error is not None:  # malformed, for a name unknown at S3
            self._settle("post", failure_from(
                InvalidArgumentsError(f"invalid arguments: {self._input.argument_error}")))
            return
        reg = self._registry
        view = DispatchExecution(self.execution)
        scopes = self._scopes
        self._wrapped = reg.execute_wrappers.applies(scopes)
        try:
            result = (await reg.execute_wrappers.run((view,), lambda: self._core(view), scopes)
                      if self._wrapped else await self._core(view))
        except BaseException as exc:
            if own_cancellation(exc):
                raise
            self._settle("final", listener_failure(exc, "a tools/execute wrapper"))
            return
        try:
            result = self._normalize_dispatch(result)
        except Exception as exc:
            self._settle("final", listener_failure(exc, "a tools/execute wrapper"))
            return
        if self._deferred:
            deferred = freeze_contexts(self._deferred)
            own = any(r is result for r in self._own)
            result = msgspec.structs.replace(
                result, additional_contexts=deferred + result.additional_contexts
            )
            if own:
                self._own.append(result)
        if self.caller.aborted and not result.is_error:
            result = aborted(not self.body_invoked, result.additional_contexts)
        self._settle("post", result)

    async def _core(self, view: DispatchExecution) -> CallResult:
        installed = view.signal
        fused = installed if installed is self.caller else Signal.any(self.caller, installed)
        try:
            return self._mark(await self._body(view, fused))
        finally:
            if fused is not installed:
                fused.detach()

    def _mark(self, result: CallResult) -> CallResult:
        # A wrapper around the core could write through the frozen result: fingerprinted
        # for S10's check only when one runs.
        self._core_made.append((result, fingerprint(result) if self._wrapped else None))
        return result

    async def _body(self, view: DispatchExecution, fused: Signal) -> CallResult:
        if fused.aborted:
            return aborted(True)
        defn = self._resolve()
        if defn is None:
            return failure_from(self._unknown_tool())
        changed = self._arguments_changed("a tools/execute wrapper")   # whoever held it
        if changed is not None:
            return changed
        self.body_invoked = True
        budget = defn.timeout_ms
        deadline = Signal() if budget else None
        signal = fused if deadline is None else Signal.any(fused, deadline)
        ctx = RunContext(self.execution, signal, self._defer, self._conclude)
        installed = view.signal
        if fused is not installed:
            view.signal = fused
        try:
            if deadline is None:
                value = defn.execute(self.execution.arguments, ctx)
                if inspect.isawaitable(value):
                    value = await value
            else:                   # the declared budget, enforced (_deadline)
                value = await within_deadline(defn.timeout_ms or 0, lambda: _run(defn, ctx),
                                              deadline)
        except BaseException as exc:  # SystemExit from argparse included: a result, never an exit
            if own_cancellation(exc):
                raise  # our own task is being cancelled: not the body's outcome
            failure = body_failure(exc, self.execution.name)
            return shown_traceback(failure) if defn.show_traceback else failure
        finally:
            if fused is not installed:
                view.signal = installed
            if signal is not fused:
                signal.detach()
        if fused.aborted:
            return aborted(False)
        try:
            built = success(defn, self.execution, value, concludes=self._concludes)
        except InvalidToolOutputError as exc:
            return failure_from(exc)
        self._own.append(built)
        return built

    def _defer(self, message: Any) -> None:
        freeze_contexts([message])  # validate now: a malformed message raises in the body
        self._deferred.append(message)

    def _conclude(self) -> None:
        self._concludes = True

    def _normalize_dispatch(self, result: Any) -> CallResult:
        """S10: accept our own core result; rebuild or revalidate anything else."""
        if not isinstance(result, CallResult):
            raise TypeError(
                f"tools/execute wrapper returned {type(result).__name__}, not a CallResult")
        for own, taken in self._core_made:
            if own is result:
                if taken is not None and fingerprint(own) != taken:
                    raise HookError(
                        "a tools/execute wrapper changed the frozen result of this call")
                return result
        contexts = freeze_contexts(result.additional_contexts)
        if result.is_error:
            return rebuild_failure(result, contexts)
        defn = self._resolve()
        if defn is None:
            raise self._unknown_tool()
        built = success(defn, self.execution, result.value,
                        concludes=bool(result.concludes_turn))
        self._own.append(built)
        return msgspec.structs.replace(built, additional_contexts=contexts)


async def _run(defn: Any, ctx: RunContext) -> Any:
    """The body, as a coroutine of its own (a budget runs it as a task: ``_deadline``)."""
    value = defn.execute(ctx.execution.arguments, ctx)
    return await value if inspect.isawaitable(value) else value
