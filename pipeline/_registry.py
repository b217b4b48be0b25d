"""The tool registry: one call through S3–S14 (docs/pipeline-spec.md §2–§7).

Composition, outermost first::

    normalization (anything thrown -> failed result)
      tools/pre-execute waterfall -> approval (ask) -> guards -> cancellation re-checks
      tools/execute waterfall (registration order) -> core dispatch -> tool body
      dispatch normalization -> tools/post-execute waterfall
    materialization -> finalize_content (once) -> tools/result observers

Routes: ``dispatch`` (continue), ``post`` (skip the body, still run post-execute), ``final``
(skip everything up to finalization).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from ._approval import ApprovalAnswer, ApprovalChannel, ApprovalRequest
from ._content import blocks_text, default_content, freeze_blocks, freeze_contexts
from ._decisions import Accept, Allow, Ask, Block, Deny
from ._definition import ToolDefinition
from ._eager import Stage
from ._errors import (
    AbortedBeforeDispatchError,
    AbortedError,
    ApprovalError,
    ApprovalPendingError,
    HookError,
    InvalidArgumentsError,
    InvalidToolOutputError,
    NotLosslessError,
    UnknownToolError,
)
from ._execution import DispatchExecution, Execution, ExecutionInput, ExecutionToken, RunContext
from ._lossless import snapshot
from ._normalize import body_failure, failure_from, listener_failure, message_of
from ._result import CallResult, ToolErrorDetail, text_block
from ._schema import argument_problem, validate
from ._signal import Signal
from ._waterfall import Registration, Waterfall
from .events import ErrorInfo

__all__ = ["PendingCall", "ToolRegistry"]

_log = logging.getLogger("codemode.pipeline")

Route = Literal["dispatch", "post", "final"]
Mode = Literal["native", "code", "both"]

ABORTED_MESSAGE = "tool call aborted"
ABORTED_BEFORE_DISPATCH_MESSAGE = "tool call aborted before dispatch"
MATERIALIZATION_MESSAGE = "tool result must be losslessly JSON-serializable"


def _aborted(before_dispatch: bool, contexts: tuple[Any, ...] = ()) -> CallResult:
    error: AbortedError = (
        AbortedBeforeDispatchError(ABORTED_BEFORE_DISPATCH_MESSAGE)
        if before_dispatch
        else AbortedError(ABORTED_MESSAGE)
    )
    return failure_from(error, additional_contexts=contexts)


def own_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is the cancellation of the task running the pipeline, the only thing
    a stage lets through; anything else a body, wrapper or listener throws is a result."""
    if not isinstance(exc, asyncio.CancelledError):
        return False
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _denial(reason: Any) -> CallResult:
    message = reason if isinstance(reason, str) else message_of(reason)
    return CallResult(
        is_error=True,
        content=(text_block(f"Error: {message}"),),
        error=ToolErrorDetail(message=message),
        denied=True,
    )


class ToolRegistry:
    """Definitions, extension points and the per-call pipeline. Owned by a ``Session``.

    Args:
        scopes: ``agent -> (None, farthest ancestor, ..., agent)``, the scope chain.
        mode_for: ``agent -> "native" | "code" | "both"``.
        approval: ``() -> ApprovalChannel | None``, looked up at call time.
    """

    def __init__(
        self,
        *,
        scopes: Callable[[str | None], tuple[str | None, ...]],
        mode_for: Callable[[str | None], Mode],
        approval: Callable[[], ApprovalChannel | None],
        reserved_name: str = "run_code",
    ) -> None:
        self.scopes = scopes
        self.mode_for = mode_for
        self.approval = approval
        self.reserved_name = reserved_name
        self.reserved: ToolDefinition | None = None
        self.tools: dict[str | None, dict[str, ToolDefinition]] = {None: {}}
        self.pre_execute: Waterfall[Any] = Waterfall("tools/pre-execute")
        self.execute_wrappers: Waterfall[CallResult] = Waterfall("tools/execute")
        self.post_execute: Waterfall[Any] = Waterfall("tools/post-execute")
        self.result_observers: list[Registration] = []
        self.guards: list[Registration] = []
        self._background: set[asyncio.Future[Any]] = set()

    # -- lookup -------------------------------------------------------------------------
    def resolve(self, name: str, agent: str | None) -> ToolDefinition | None:
        """The definition visible for ``name`` to ``agent`` (reserved tool included):
        the nearest scope wins (the agent, its ancestors, then global)."""
        if self.reserved is not None and name == self.reserved.name:
            return self.reserved
        for scope in reversed(self.scopes(agent)):
            defn = self.tools.get(scope, {}).get(name)
            if defn is not None:
                return defn
        return None

    def visible(self, agent: str | None) -> list[ToolDefinition]:
        """Definitions visible to ``agent`` (reserved excluded), nearest scope first-wins,
        in registration order of the names."""
        seen: dict[str, ToolDefinition] = {}
        for scope in self.scopes(agent):   # a name keeps its first place, a nearer definition
            seen.update(self.tools.get(scope, {}))
        return list(seen.values())

    def is_reserved(self, name: str) -> bool:
        return name == self.reserved_name or (
            self.reserved is not None and name == self.reserved.name
        )

    # -- one call -----------------------------------------------------------------------
    async def start(self, inp: ExecutionInput) -> PendingCall:
        """S3–S7 for one call; returns the pending call (route decided)."""
        call = self.prepare(inp)
        await call.start()
        return call

    def prepare(self, inp: ExecutionInput) -> PendingCall:
        """A pending call for ``inp`` after S3 (execution created, arguments frozen; done
        synchronously), not started: ``await call.start()`` runs S4–S7. Holding it before
        it starts lets a scheduler ``abandon`` it at any stage.

        Raises:
            TypeError, ValueError: not an ``ExecutionInput``, an empty ``call_id`` or
                ``name``, or no ``Signal``.
        """
        if not isinstance(inp, ExecutionInput):
            raise TypeError(f"expected an ExecutionInput, got {type(inp).__name__}")
        if not isinstance(inp.call_id, str) or not inp.call_id:
            raise ValueError("call_id must be a non-empty string")
        if not isinstance(inp.name, str) or not inp.name:
            raise ValueError("name must be a non-empty string")
        if not isinstance(inp.signal, Signal):
            raise TypeError("every call needs a Signal")
        call = PendingCall(self, inp)
        call._create()
        return call

    async def execute(self, inp: ExecutionInput) -> CallResult:
        """Run one call S3–S14 and return the published frozen result.

        Cancelling the awaiting task counts as the caller aborting: the call still settles,
        is finalized and published, then ``CancelledError`` is re-raised.
        """
        cancel = Signal()
        fused = Signal.any(inp.signal, cancel) if isinstance(inp.signal, Signal) else inp.signal
        inp = msgspec.structs.replace(inp, signal=fused)

        async def run() -> CallResult:
            call = await self.start(inp)
            await call.dispatch()
            return await call.commit()

        try:
            result: CallResult = await shielded(run(), cancel)
            return result
        finally:
            if isinstance(fused, Signal):
                fused.detach()

    def publish(self, execution: Execution, result: CallResult) -> None:
        """S14: call every ``tools/result`` observer synchronously; contain failures."""
        scopes = self.scopes(execution.agent)
        for reg in tuple(self.result_observers):
            if not reg.applies(scopes):
                continue
            try:
                out = reg.fn(execution, result)
            except BaseException:
                _log.warning("tools/result observer %r raised", reg.fn, exc_info=True)
                continue
            if inspect.isawaitable(out):
                try:
                    future = asyncio.ensure_future(_contained(out))
                except BaseException:
                    _log.warning("tools/result observer %r returned a bad awaitable", reg.fn)
                    continue
                self._background.add(future)
                future.add_done_callback(self._observer_done)

    def _observer_done(self, future: asyncio.Future[Any]) -> None:
        self._background.discard(future)
        if not future.cancelled() and future.exception() is not None:
            _log.warning("tools/result observer failed", exc_info=future.exception())

    async def drain(self) -> None:
        """Await pending observer awaitables (used on close), those they start included.

        Each round forgets what it awaited itself: a done callback runs only at a later
        turn of the loop, and since Python 3.12 ``gather`` of futures that are all done
        returns without a turn, so waiting for the callbacks would spin."""
        while self._background:
            awaited = tuple(self._background)
            await asyncio.gather(*awaited, return_exceptions=True)
            self._background.difference_update(awaited)


async def _contained(awaitable: Any) -> Any:
    """Await an observer's awaitable; whatever it throws (``SystemExit`` included) is
    logged, never re-raised into the event loop (a task that raises ``SystemExit`` would
    stop the loop and the process)."""
    try:
        return await awaitable
    except asyncio.CancelledError:
        raise
    except BaseException:
        _log.warning("tools/result observer failed", exc_info=True)
        return None


async def shielded(coro: Coroutine[Any, Any, Any], cancel: Signal) -> Any:
    """Await ``coro`` to completion even if the awaiting task is cancelled: cancellation
    aborts ``cancel`` instead, and ``CancelledError`` is re-raised after settling.
    ``coro``'s first step runs now (``Stage``)."""
    stage = Stage(coro)
    task = stage.task
    if task is None:               # it completed at once
        return await stage.outcome()
    cancelled = False
    while True:
        try:
            result = await stage.outcome()
            break
        except asyncio.CancelledError:
            if task.done():
                if task.cancelled():
                    raise
                result = task.result()
                cancelled = True
                break
            cancelled = True
            cancel.abort(AbortedError("the calling task was cancelled"))
    if cancelled:
        raise asyncio.CancelledError
    return result


class PendingCall:
    """One call in flight: made by ``ToolRegistry.prepare`` (S3), then ``start()`` (S4–S7),
    ``dispatch()`` (S8–S10), ``commit()`` (S11–S14). Each phase runs at most once;
    ``commit`` returns the published result. Batches and sub-call schedulers run the phases
    separately so that only ``dispatch`` overlaps between calls; ``abandon()`` ends a call
    whatever phase it is stuck in."""

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

    def __repr__(self) -> str:
        return f"<PendingCall {self._input.name} {self._input.call_id} route={self.route}>"

    # -- helpers ------------------------------------------------------------------------
    def _resolve(self) -> ToolDefinition | None:
        """The definition the call's name reaches now (``None``: unknown, or not among the
        input's ``reachable`` names)."""
        inp = self._input
        if inp.reachable is not None and inp.name not in inp.reachable:
            return None
        return self._registry.resolve(inp.name, inp.agent)

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

    # -- S3 ... S7 ----------------------------------------------------------------------
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
                self._settle("final", _aborted(True))
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
            self._settle("final", _aborted(True))
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
            self._settle("post", _denial(reason))
            return
        if self.caller.aborted:
            self._settle("post", _aborted(True))
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
            self._settle("post", _aborted(True))
            return False
        if isinstance(decision, Deny):
            self._settle("post", _denial(decision.reason))
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

    # -- S8 ... S10 ---------------------------------------------------------------------
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
            result = _aborted(not self.body_invoked, result.additional_contexts)
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
        self._core_made.append((result, _fingerprint(result) if self._wrapped else None))
        return result

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

    async def _body(self, view: DispatchExecution, fused: Signal) -> CallResult:
        if fused.aborted:
            return _aborted(True)
        defn = self._resolve()
        if defn is None:
            return failure_from(UnknownToolError(f'unknown tool "{self.execution.name}"'))
        changed = self._arguments_changed("a tools/execute wrapper")   # whoever held it
        if changed is not None:
            return changed
        self.body_invoked = True
        ctx = RunContext(self.execution, fused, self._defer, self._conclude)
        installed = view.signal
        if fused is not installed:
            view.signal = fused
        try:
            value = defn.execute(self.execution.arguments, ctx)
            if inspect.isawaitable(value):
                value = await value
        except BaseException as exc:  # SystemExit from argparse included: a result, never an exit
            if own_cancellation(exc):
                raise  # our own task is being cancelled: not the body's outcome
            return body_failure(exc, self.execution.name)
        finally:
            if fused is not installed:
                view.signal = installed
        if fused.aborted:
            return _aborted(False)
        try:
            return self._success(defn, value, concludes=self._concludes)
        except InvalidToolOutputError as exc:
            return failure_from(exc)

    def _defer(self, message: Any) -> None:
        freeze_contexts([message])  # validate now: a malformed message raises in the body
        self._deferred.append(message)

    def _conclude(self) -> None:
        self._concludes = True

    def _success(self, defn: ToolDefinition, value: Any, *, concludes: bool) -> CallResult:
        """Snapshot, validate, render, compute meta. Raises ``InvalidToolOutputError``."""
        name = self.execution.name

        def invalid(problem: str) -> InvalidToolOutputError:
            return InvalidToolOutputError(f'tool "{name}" returned invalid output: {problem}')

        try:
            frozen = snapshot(value, what="value")
        except NotLosslessError as exc:
            raise invalid(exc.message) from None
        except Exception as exc:
            raise invalid(f"value could not be read ({message_of(exc)})") from None
        schema, fits = defn.output_schema, defn.output_fits
        if schema is not None and (fits is None or not fits(frozen)):
            problems = validate(schema, frozen, label="value")
            if problems:
                raise invalid("; ".join(problems))
        args = self.execution.arguments

        def frozen_hook(hook: Any, label: str, freeze: Any, what: str) -> Any:
            """`hook(args, frozen)` (the tool's render or presentation meta), frozen."""
            try:
                made = hook(args, frozen)
            except Exception as exc:
                raise invalid(f"{label} raised: {message_of(exc)}") from None
            try:
                return freeze(made, what=what)
            except NotLosslessError as exc:
                raise invalid(exc.message) from None

        content = (default_content(frozen) if defn.render is None else
                   frozen_hook(defn.render, "render", freeze_blocks, "rendered content"))
        meta = None
        if self.execution.parent is None and defn.presentation_meta is not None:
            meta = frozen_hook(defn.presentation_meta, "presentation meta", snapshot,
                               "presentation meta")
        built = CallResult(
            is_error=False, value=frozen, content=content, meta=meta, concludes_turn=concludes
        )
        self._own.append(built)
        return built

    def _normalize_dispatch(self, result: Any) -> CallResult:
        """S10: accept our own core result; rebuild or revalidate anything else."""
        if not isinstance(result, CallResult):
            raise TypeError(
                f"tools/execute wrapper returned {type(result).__name__}, not a CallResult")
        for own, fingerprint in self._core_made:
            if own is result:
                if fingerprint is not None and _fingerprint(own) != fingerprint:
                    raise HookError(
                        "a tools/execute wrapper changed the frozen result of this call")
                return result
        contexts = freeze_contexts(result.additional_contexts)
        if result.is_error:
            return self._rebuild_failure(result, contexts)
        defn = self._resolve()
        if defn is None:
            raise UnknownToolError(f'unknown tool "{self.execution.name}"')
        success = self._success(defn, result.value, concludes=bool(result.concludes_turn))
        return msgspec.structs.replace(success, additional_contexts=contexts)

    @staticmethod
    def _rebuild_failure(result: CallResult, contexts: tuple[Any, ...]) -> CallResult:
        error = result.error
        message = (
            error.message
            if isinstance(error, ToolErrorDetail) and isinstance(error.message, str)
            else "tool call failed"
        )
        info = (
            error.info
            if isinstance(error, ToolErrorDetail) and isinstance(error.info, ErrorInfo)
            else None
        )
        content = (
            freeze_blocks(result.content) if result.content else (text_block(f"Error: {message}"),)
        )
        meta = snapshot(result.meta, what="meta") if result.meta is not None else None
        return CallResult(
            is_error=True,
            content=content,
            error=ToolErrorDetail(message=message, info=info),
            meta=meta,
            additional_contexts=contexts,
            denied=result.denied is True,
        )

    # -- S11 ... S14 --------------------------------------------------------------------
    async def commit(self) -> CallResult:
        """S11 (post route only), S12–S14; returns the published frozen result."""
        if self._phase in ("created", "started") and self.route != "dispatch":
            self._phase = "dispatched"
        if self._phase != "dispatched":
            raise RuntimeError(f"{self!r}: commit() called in phase {self._phase!r}")
        self._phase = "committing"
        if self.route == "post":
            await self._post()
        assert self.result is not None
        result = self._finalize(self.result)
        self._published = result
        self._phase = "committed"
        scopes = self._scopes
        watched = any(reg.applies(scopes) for reg in self._registry.result_observers)
        fingerprint = _fingerprint(result) if watched else b""
        self._registry.publish(self.execution, result)
        if watched and _fingerprint(result) != fingerprint:  # an observer wrote through it
            _log.warning("a tools/result observer changed the frozen result of %s; the caller "
                         "gets the result as published", self.execution.call_id)
            result = _restored(result, fingerprint)
            self._published = result
        return result

    async def _post(self) -> None:
        assert self.result is not None
        current = self.result
        scopes = self._scopes
        watched = self._registry.post_execute.applies(scopes)
        if not watched:      # nothing to ask: the result as it stands (``Accept``)
            result = current
            if self.caller.aborted and not result.is_error:
                result = _aborted(not self.body_invoked, result.additional_contexts)
            self._settle("final", result)
            return
        fingerprint = _fingerprint(current)
        try:
            decision = await self._registry.post_execute.run(
                (self.execution, current), Accept, scopes
            )
            if _fingerprint(current) != fingerprint:
                raise HookError(
                    "a tools/post-execute listener changed the frozen result of this call")
            result = self._apply_post(decision, current)
        except BaseException as exc:
            if own_cancellation(exc):
                raise
            self._settle("final", listener_failure(exc, "a tools/post-execute listener"))
            return
        if self.caller.aborted and not result.is_error:
            result = _aborted(not self.body_invoked, result.additional_contexts)
        self._settle("final", result)

    def _apply_post(self, decision: Any, result: CallResult) -> CallResult:
        if isinstance(decision, Block):
            feedback = freeze_blocks(decision.feedback, what="block feedback")
            message = blocks_text(feedback) or "blocked by tools/post-execute policy"
            return CallResult(
                is_error=True,
                content=feedback,
                error=ToolErrorDetail(message=message),
                additional_contexts=freeze_contexts(decision.additional_contexts),
                denied=True,
            )
        if not isinstance(decision, Accept):
            raise TypeError(
                f"tools/post-execute returned an invalid decision ({type(decision).__name__})"
            )
        extra = freeze_contexts(decision.additional_contexts)
        contexts = result.additional_contexts + extra
        has_content = decision.content is not UNSET
        has_value = decision.value is not UNSET
        if has_content and has_value:
            raise ValueError(
                "a tools/post-execute decision may replace the content or the value, not both"
            )
        if has_value:
            if result.is_error:
                raise ValueError("tools/post-execute cannot replace the value of a failed result")
            defn = self._resolve()
            if defn is None:
                raise UnknownToolError(f'unknown tool "{self.execution.name}"')
            success = self._success(defn, decision.value, concludes=result.concludes_turn)
            return msgspec.structs.replace(success, additional_contexts=contexts)
        if has_content:
            content = freeze_blocks(decision.content, what="replacement content")
            return msgspec.structs.replace(result, content=content, additional_contexts=contexts)
        if extra:
            return msgspec.structs.replace(result, additional_contexts=contexts)
        return result

    def _finalize(self, result: CallResult) -> CallResult:
        """S12 materialization, S13 ``finalize_content`` (at most once), S12 again. A
        result this call froze itself, which every listener that saw it was checked not to
        have changed, is already materialized."""
        try:
            if not any(r is result for r in self._own):
                result = _materialize(result)
        except Exception:
            result = failure_from(NotLosslessError(MATERIALIZATION_MESSAGE))
        finalizer = self._finalizer
        if finalizer is None:
            return result
        try:
            out = finalizer(self.execution, result)
            if inspect.isawaitable(out):
                if hasattr(out, "close"):
                    out.close()
                raise TypeError(
                    "finalize_content must be synchronous, but it returned an awaitable"
                )
            if out is not None:
                result = msgspec.structs.replace(
                    result, content=freeze_blocks(out, what="finalized content")
                )
            return _materialize(result)
        except BaseException as exc:
            return body_failure(exc, self.execution.name)


def _fingerprint(result: CallResult) -> bytes:
    """What a listener could change by writing through a frozen container (value, content,
    meta, contexts), as canonical JSON; a result that no longer encodes gets ``b""``."""
    try:
        return msgspec.json.encode(
            (None if result.is_error else result.value, result.content, result.meta,
             result.additional_contexts))
    except Exception:
        return b""


def _restored(result: CallResult, fingerprint: bytes) -> CallResult:
    """``result`` with the fields of ``fingerprint`` decoded and frozen again."""
    value, content, meta, contexts = msgspec.json.decode(fingerprint)
    return msgspec.structs.replace(
        result,
        value=msgspec.UNSET if result.is_error else snapshot(value, what="value"),
        content=freeze_blocks(content),
        meta=snapshot(meta, what="meta") if meta is not None else None,
        additional_contexts=freeze_contexts(contexts),
    )


def _materialize(result: Any) -> CallResult:
    """Snapshot every presentation field; enforce the success/failure shape."""
    if not isinstance(result, CallResult):
        raise TypeError("not a CallResult")
    content = freeze_blocks(result.content, what="content")
    meta = snapshot(result.meta, what="meta") if result.meta is not None else None
    contexts = freeze_contexts(result.additional_contexts)
    if result.is_error:
        error = result.error
        if not isinstance(error, ToolErrorDetail) or not isinstance(error.message, str):
            raise TypeError("a failed result needs an error message")
        info = error.info
        if info is not None and not (
            isinstance(info, ErrorInfo)
            and isinstance(info.name, str)
            and isinstance(info.code, str)
        ):
            raise TypeError("error info must be {name, code} strings")
        return CallResult(
            is_error=True,
            content=content,
            error=ToolErrorDetail(message=str(error.message), info=info),
            meta=meta,
            additional_contexts=contexts,
            denied=result.denied is True,
        )
    value = snapshot(result.value, what="value")
    return CallResult(
        is_error=False, content=content, value=value, meta=meta,
        additional_contexts=contexts, concludes_turn=bool(result.concludes_turn is True),
    )
