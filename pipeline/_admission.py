"""A call's admission, S3–S7 (docs/pipeline-spec.md §2, §4): the execution made and its
arguments frozen and checked, then the ``tools/pre-execute`` decision, the approval it may
ask for, the guards and the cancellation re-check. Its outcome is the call's route.

Separate from dispatch and commit: it runs one call at a time, in submission order, before
any of the call's work; everything here decides whether that work runs at all.
"""

from __future__ import annotations

import inspect
from typing import Any

import msgspec

from ._approval import ApprovalAnswer, ApprovalRequest
from ._decisions import Allow, Ask, Deny
from ._errors import ApprovalError, ApprovalPendingError, InvalidArgumentsError, UnknownToolError
from ._execution import Execution, ExecutionToken
from ._lossless import snapshot
from ._normalize import failure_from, listener_failure, message_of
from ._pending_state import PendingState, aborted
from ._result import CallResult, ToolErrorDetail, text_block
from ._schema import argument_problem
from ._shield import own_cancellation
from .events import ErrorInfo

__all__ = ["AdmissionPhase", "denial"]


def denial(reason: Any, code: str | None = None) -> CallResult:
    """The failure of a call a guard or a ``Deny`` refused, for ``reason``; with ``code``,
    its ``error.info`` is ``{name: "Denied", code}``."""
    message = reason if isinstance(reason, str) else message_of(reason)
    info = None if code is None else ErrorInfo(name="Denied", code=code)
    return CallResult(
        is_error=True,
        content=(text_block(f"Error: {message}"),),
        error=ToolErrorDetail(message=message, info=info),
        denied=True,
    )


class AdmissionPhase(PendingState):
    """S3 (``_create``, from ``ToolRegistry.prepare``) and S4–S7 (``start``)."""

    __slots__ = ()

    async def start(self) -> None:
        """S4–S7 (at most once, after ``ToolRegistry.prepare`` did S3)."""
        if self._phase != "created":
            raise RuntimeError(f"{self!r}: start() called in phase {self._phase!r}")
        self._phase = "started"
        if self._needs_policy:
            await self._policy()

    def _create(self) -> None:
        """S3, synchronously: token, definition and finalizer, frozen arguments, the
        Code-Mode collapse and the pre-aborted check. Policy is left to ``start``."""
        inp = self._input
        reg = self._registry
        token = ExecutionToken()
        defn = self._resolve()
        self._finalizer = defn.finalize_content if defn is not None else None
        collapsed = (
            reg.mode_for(inp.agent) == "code"
            and inp.parent is None
            and defn is not None
            and not reg.is_reserved(inp.name)
        )
        args_error: BaseException | None = None
        try:
            arguments = snapshot(inp.arguments, what="arguments")
            self._arguments_json = msgspec.json.encode(arguments)
        except Exception as exc:
            arguments, args_error = None, exc
        self.execution = Execution(
            call_id=inp.call_id,
            root_call_id=inp.root_call_id or inp.call_id,
            name=inp.name,
            arguments=arguments,
            agent=inp.agent,
            parent=inp.parent,
            token=token,
            signal=self.caller,
            definition=defn,
            idempotency_key=inp.idempotency_key,
            resumption=inp.resumption,
        )
        self._phase = "created"
        if args_error is not None:
            self._settle("final", failure_from(args_error))
            return
        if not collapsed and defn is not None:
            fits = defn.arguments_fit
            problem = inp.argument_error or (
                None if fits is not None and fits(arguments)
                else argument_problem(defn.parameters, arguments))
            if problem is not None:  # malformed: policy is not asked about a call that cannot run
                self._settle("final", failure_from(
                    InvalidArgumentsError(f"invalid arguments: {problem}")))
                return
        if collapsed:
            if self.caller.aborted:
                self._settle("final", aborted(True))
            else:
                self._finalizer = None
                reserved = reg.reserved.name if reg.reserved is not None else reg.reserved_name
                self._settle(
                    "final",
                    failure_from(
                        UnknownToolError(
                            f"only `{reserved}` is callable directly — "
                            f"call `{inp.name}` inside a program"
                        )
                    ),
                )
            return
        if self.caller.aborted:
            self._settle("final", aborted(True))
            return
        self._needs_policy = True

    async def _policy(self) -> None:
        reg = self._registry
        execution = self.execution
        scopes = self._scopes
        listened = reg.pre_execute.applies(scopes)
        self._seen = listened or bool(reg.guards)
        if listened and not await self._decide(execution, scopes):
            return
        try:
            reason = self._guards()
        except BaseException as exc:
            self._settle("final", listener_failure(exc, "a guard"))
            return
        if reason is not None:
            self._settle("post", denial(reason))
            return
        if self.caller.aborted:
            self._settle("post", aborted(True))
            return
        changed = (self._arguments_changed("a tools/pre-execute listener or a guard")
                   if self._seen else None)
        if changed is not None:
            self._settle("final", changed)
            return
        if not self._abandoned:
            self.route = "dispatch"

    async def _decide(self, execution: Execution, scopes: tuple[str | None, ...]) -> bool:
        """The ``tools/pre-execute`` decision (and the approval it asks for): True when the
        call goes on to the guards, else False with the call settled."""
        reg = self._registry
        try:
            decision = await reg.pre_execute.run((execution,), Allow, scopes)
        except BaseException as exc:
            if own_cancellation(exc):
                raise
            self._settle("final", listener_failure(exc, "a tools/pre-execute listener"))
            return False
        approval_cancelled = False
        asked_reason = decision.reason if isinstance(decision, Ask) else None
        if isinstance(decision, Ask):
            try:
                decision, approval_cancelled = await self._ask(decision)
            except BaseException as exc:
                if own_cancellation(exc):
                    raise
                self._settle("final", listener_failure(exc, "the approval channel"))
                return False
        elif not isinstance(decision, (Allow, Deny)):
            self._settle(
                "final",
                listener_failure(
                    TypeError("tools/pre-execute returned an invalid decision "
                              f"({type(decision).__name__})"),
                    "a tools/pre-execute listener",
                ),
            )
            return False
        if decision is None:    # deferred: nothing ran; the caller stops and asks later
            self._settle("final", failure_from(ApprovalPendingError(
                f'tool "{execution.name}" is waiting for approval'
                + (f": {asked_reason}" if asked_reason else ""))))
            return False
        if self.caller.aborted and approval_cancelled:
            self._settle("post", aborted(True))
            return False
        if isinstance(decision, Deny):
            self._settle("post", denial(decision.reason, decision.code))
            return False
        return True

    async def _ask(self, ask: Ask) -> tuple[Allow | Deny | None, bool]:
        """The approval for ``ask``: ``(decision, cancelled)``; a ``None`` decision means
        the approval was deferred (the call fails ``APPROVAL_PENDING``)."""
        name = self.execution.name
        own = self._input.approval
        channel = own if own is not None else self._registry.approval()
        if channel is None:
            return Deny(ask.reason or f'tool "{name}" requires approval (not yet supported)'), False
        if self.execution.agent is None and own is None:
            return Deny(
                f'tool "{name}" requires approval, but the call has no agent to route it'
            ), False
        answer = await channel.request(
            ApprovalRequest(
                agent=self.execution.agent or "",
                tool_name=name,
                call_id=self.execution.call_id,
                reason=ask.reason,
                signal=self.caller,
                defer=ask.defer,
            )
        )
        outcome: Any
        if isinstance(answer, ApprovalAnswer):
            outcome, reason = answer.outcome, answer.reason
        else:
            outcome, reason = answer, None
        if outcome == "allowed-once":
            return Allow(), False
        if outcome == "rejected":
            because = f": {reason}" if reason else ""
            return Deny(f'the user rejected tool "{name}"{because}'), False
        if outcome == "cancelled":
            return Deny(f'approval for tool "{name}" was cancelled'), True
        if outcome == "unavailable":
            return Deny(
                f'tool "{name}" requires approval, but no approval channel is available'
            ), False
        if outcome == "deferred":
            return None, False
        raise ApprovalError(f"approval returned an unexpected outcome: {message_of(outcome)}")

    def _guards(self) -> str | None:
        """Global guards, then the agent's scope chain farthest -> nearest; first reason wins."""
        guards = self._registry.guards
        for scope in self._scopes:
            for reg in tuple(guards):
                if reg.agent != scope:
                    continue
                reason = reg.fn(self.execution)
                if inspect.isawaitable(reason):
                    if hasattr(reason, "close"):
                        reason.close()
                    raise TypeError(f"guard {reg.fn!r} must be synchronous")
                if reason is None:
                    continue
                if not isinstance(reason, str):
                    raise TypeError(
                        f"guard {reg.fn!r} returned {type(reason).__name__}, not str | None"
                    )
                return reason
        return None
