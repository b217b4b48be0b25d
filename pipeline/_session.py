"""``Session``: tools, extension points, the log, turns and batches (docs/pipeline-spec.md §2, §8).

One model tool call (``call``) or one assistant message's calls (``call_batch``) go through
S1–S17: ``tool/call`` appended when a call starts, the registry's S3–S14, ``tool/result``
appended in model order, and after the batch the queued ``additionalContexts`` delivered
FIFO as ``user/message`` events after the step's end marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Literal

import msgspec

from ._approval import ApprovalChannel, ApprovalService
from ._content import freeze_blocks, freeze_contexts
from ._definition import ToolDefinition
from ._errors import DuplicateToolError, ReservedToolError, ResumeError
from ._execution import ExecutionInput
from ._lossless import FrozenDict, snapshot
from ._pending import PendingCall
from ._registry import Mode, ToolRegistry
from ._result import CallResult
from ._resume import Resumption, find_suspension, normalize_decisions
from ._scheduler import Scheduled, Scheduler
from ._shield import own_cancellation, shielded
from ._signal import Signal
from ._waterfall import Waterfall, registry_list
from .events import (
    ApprovalDecision,
    ApprovalPolicyChanged,
    Event,
    InboxQueued,
    MessageSource,
    StepEnd,
    StepStart,
    ToolCall,
    ToolResult,
    ToolResultBlock,
    ToolResultMessage,
    ToolResumed,
    TurnEnd,
    TurnStart,
    UserMessage,
    UserMessageBody,
)
from .log import SessionLog, open_log

__all__ = ["POINTS", "Session"]

_log = logging.getLogger("codemode.pipeline")

#: extension points accepted by ``Session.on``
POINTS = (
    "tools/pre-execute",     # (execution, next) -> Allow | Deny | Ask
    "tools/execute",         # (dispatch_execution, next) -> CallResult
    "tools/post-execute",    # (execution, result, next) -> Accept | Block
    "tools/result",          # (execution, result) -> None   (observer; errors contained)
    "tools/changed",         # (session) -> None              (tool set or mode changed)
    "approval/answer",       # (request, next) -> "allowed-once" | "rejected" | ...
    "tools/code-dispatch-log",  # (execution, result, content, next) -> content blocks
)

_MODES = ("native", "code", "both")


_GLOBAL_SCOPE: tuple[str | None, ...] = (None,)


class Session:
    """A tool session: registry, extension points, approval, log, turns and batches.

    Args:
        tools: definitions registered globally, in order.
        log: ``None`` (in memory), a path (``.db``/``.sqlite`` SQLite, ``.jsonl`` JSONL) or a
            ``SessionLog``. An existing log is repaired on open.
        mode: default presentation mode: ``"native"``, ``"code"`` or ``"both"``.
        approval: ``None`` (no approval channel mounted: ``ask`` degrades to deny),
            ``"ask"``/``"never"`` (mount the default service with that policy), or any
            ``ApprovalChannel``.
        max_parallel_tool_calls: bound of the rolling pool of concurrency-safe calls (>= 1).
        reserved_name: the name of the reserved router tool (cannot be registered).
    """

    def __init__(
        self,
        tools: Iterable[ToolDefinition] = (),
        *,
        log: str | os.PathLike[str] | SessionLog | None = None,
        mode: Mode = "native",
        approval: Literal["ask", "never"] | ApprovalChannel | None = None,
        max_parallel_tool_calls: int = 10,
        reserved_name: str = "run_code",
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, not {mode!r}")
        if max_parallel_tool_calls < 1:
            raise ValueError("max_parallel_tool_calls must be >= 1")
        self.log: SessionLog = open_log(log)
        self.max_parallel_tool_calls = max_parallel_tool_calls
        self._mode: Mode = mode
        self._agent_modes: dict[str, Mode] = {}
        self._agent_parents: dict[str, str | None] = {}
        self._approval: ApprovalChannel | None = None
        self._answerers: Waterfall[str] = Waterfall("approval/answer")
        self._changed: list[Any] = []
        self._dispatch_log: Waterfall[Any] = Waterfall("tools/code-dispatch-log")
        self._registry = ToolRegistry(
            scopes=self.scope_chain,
            mode_for=self.mode_for,
            approval=lambda: self._approval,
            reserved_name=reserved_name,
        )
        self._inbox: list[tuple[UserMessageBody, tuple[int, ...]]] = []
        self._turn = self._restore()
        self._turn_open = False
        self._step = 0
        self._open_steps = 0            # batches whose step is open (concurrent calls overlap)
        self._implicit_batches = 0      # batches sharing a turn that a batch opened
        self._implicit_cancelled = False
        self.turn_concluded = False
        if approval is not None:
            if isinstance(approval, str):
                self.mount_approval(approval)
            else:
                self._approval = approval
        for defn in tools:
            self.register(defn)

    def _restore(self) -> int:
        """The last turn number; refills the inbox with queued, undelivered messages."""
        turn = 0
        pending: dict[str, tuple[UserMessageBody, tuple[int, ...]]] = {}
        for event in self.log.read():
            if isinstance(event, TurnStart):
                turn = max(turn, event.turn)
            elif isinstance(event, InboxQueued):
                pending[event.message.id] = (event.message, event.source_event_seqs)
            elif isinstance(event, UserMessage):
                pending.pop(event.message.id, None)
        self._inbox = list(pending.values())
        return turn

    # -- agents and modes ---------------------------------------------------------------
    def add_agent(self, agent: str, *, parent: str | None = None) -> Callable[[], None]:
        """Declare ``agent`` (optionally a child of ``parent``) for scoping and mode
        inheritance; return a disposer. Undeclared agents are roots."""
        if parent is not None and agent in self.scope_chain(parent):
            raise ValueError(f"agent {agent!r} cannot descend from itself")
        self._agent_parents[agent] = parent

        def dispose() -> None:
            if self._agent_parents.get(agent, ...) == parent:
                del self._agent_parents[agent]

        return dispose

    def scope_chain(self, agent: str | None) -> tuple[str | None, ...]:
        """``(None, farthest ancestor, ..., agent)``; ``(None,)`` without an agent."""
        if agent is None:
            return _GLOBAL_SCOPE
        chain: list[str | None] = []
        seen: set[str] = set()
        current: str | None = agent
        while current is not None and current not in seen:
            seen.add(current)
            chain.append(current)
            current = self._agent_parents.get(current)
        return (None, *reversed(chain))

    @property
    def mode(self) -> Mode:
        return self._mode

    def set_mode(self, mode: Mode, *, agent: str | None = None) -> Callable[[], None]:
        """Select a mode for the session (``agent=None``) or one agent (inherited by its
        descendants); return a disposer restoring the previous setting."""
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, not {mode!r}")
        if agent is None:
            previous: Any = self._mode
            self._mode = mode
        else:
            previous = self._agent_modes.get(agent)
            self._agent_modes[agent] = mode
        self._notify_changed()

        def dispose() -> None:
            if agent is None:
                self._mode = previous
            elif previous is None:
                self._agent_modes.pop(agent, None)
            else:
                self._agent_modes[agent] = previous
            self._notify_changed()

        return dispose

    def mode_for(self, agent: str | None) -> Mode:
        """The nearest explicit mode in the agent's scope chain, else the session's."""
        for scope in reversed(self.scope_chain(agent)):
            if scope is not None and scope in self._agent_modes:
                return self._agent_modes[scope]
        return self._mode

    # -- tools ----------------------------------------------------------------------------
    @property
    def reserved_name(self) -> str:
        reg = self._registry
        return reg.reserved.name if reg.reserved is not None else reg.reserved_name

    def register(self, defn: ToolDefinition, *, agent: str | None = None) -> Callable[[], None]:
        """Register a tool globally or for one agent (and its descendants); return an
        idempotent disposer.

        Raises:
            ReservedToolError: the name is the reserved router's.
            DuplicateToolError: the name is taken in that scope.
        """
        if not isinstance(defn, ToolDefinition):
            raise TypeError(f"expected a ToolDefinition, got {type(defn).__name__}")
        if self._registry.is_reserved(defn.name):
            raise ReservedToolError(f'"{defn.name}" is reserved and cannot be registered')
        scope = self._registry.tools.setdefault(agent, {})
        if defn.name in scope:
            raise DuplicateToolError(f'a tool named "{defn.name}" is already registered')
        scope[defn.name] = defn
        self._notify_changed()

        def dispose() -> None:
            if scope.get(defn.name) is defn:
                del scope[defn.name]
                self._notify_changed()

        return dispose

    def reserve(self, defn: ToolDefinition) -> Callable[[], None]:
        """Install the reserved router tool (e.g. Code Mode's ``run_code``). It cannot be
        registered, shadowed or restricted, and is not in ``visible_tools``.

        Raises:
            ReservedToolError: a reserved tool is already installed, or a user tool has the name.
        """
        if not isinstance(defn, ToolDefinition):
            raise TypeError(f"expected a ToolDefinition, got {type(defn).__name__}")
        reg = self._registry
        if reg.reserved is not None:
            raise ReservedToolError(f'the reserved tool "{reg.reserved.name}" is already installed')
        if any(defn.name in scope for scope in reg.tools.values()):
            raise ReservedToolError(f'"{defn.name}" is already registered as a tool')
        reg.reserved = defn
        self._notify_changed()

        def dispose() -> None:
            if reg.reserved is defn:
                reg.reserved = None
                self._notify_changed()

        return dispose

    def visible_tools(self, agent: str | None = None) -> list[ToolDefinition]:
        """Definitions visible to ``agent``, reserved excluded (nearest scope wins)."""
        return self._registry.visible(agent)

    def resolve(self, name: str, agent: str | None = None) -> ToolDefinition | None:
        """The definition ``name`` resolves to for ``agent`` (reserved included)."""
        return self._registry.resolve(name, agent)

    def model_tools(self, agent: str | None = None) -> list[dict[str, Any]]:
        """What the model is offered: ``{name, description, parameters}`` per tool.
        ``native``: visible tools; ``code``: only the reserved tool; ``both``: visible tools
        plus the reserved tool."""
        mode = self.mode_for(agent)
        reserved = self._registry.reserved
        tools = [] if mode == "code" else [d.model_schema() for d in self.visible_tools(agent)]
        if mode in ("code", "both") and reserved is not None:
            tools.append(reserved.model_schema())
        return tools

    def _notify_changed(self) -> None:
        for reg in tuple(self._changed):
            try:
                reg.fn(self)
            except BaseException:
                _log.warning("tools/changed listener %r raised", reg.fn, exc_info=True)

    # -- extension points ---------------------------------------------------------------
    def on(
        self, point: str, fn: Callable[..., Any], *, agent: str | None = None
    ) -> Callable[[], None]:
        """Register ``fn`` at an extension point (see ``POINTS``); registration order is
        composition order (first registered = outermost). Returns an idempotent disposer.

        Raises:
            ValueError: unknown point.
        """
        reg = self._registry
        if point == "tools/pre-execute":
            return reg.pre_execute.register(fn, agent=agent)
        if point == "tools/execute":
            return reg.execute_wrappers.register(fn, agent=agent)
        if point == "tools/post-execute":
            return reg.post_execute.register(fn, agent=agent)
        if point == "tools/result":
            return registry_list(point, reg.result_observers, fn, agent)
        if point == "tools/changed":
            return registry_list(point, self._changed, fn, agent)
        if point == "approval/answer":
            return self._answerers.register(fn, agent=agent)
        if point == "tools/code-dispatch-log":
            return self._dispatch_log.register(fn, agent=agent)
        raise ValueError(f"unknown extension point {point!r}; expected one of {POINTS}")

    def guard(
        self, fn: Callable[[Any], str | None], *, agent: str | None = None
    ) -> Callable[[], None]:
        """Register a synchronous guard ``execution -> str | None`` (a string denies).
        Global guards run first, then the agent's chain from the farthest ancestor; the
        first reason wins. Does not fire ``tools/changed``. Returns a disposer."""
        return registry_list("guard", self._registry.guards, fn, agent)

    # -- approval -------------------------------------------------------------------------
    @property
    def approval(self) -> ApprovalChannel | None:
        """The mounted approval channel (``None``: ``ask`` degrades to deny)."""
        return self._approval

    @approval.setter
    def approval(self, channel: ApprovalChannel | None) -> None:
        self._approval = channel

    def may_ask(self, agent: str | None = None) -> bool:
        """Whether a call by ``agent`` can need an approval now: a ``tools/pre-execute``
        listener (the only source of ``Ask``) is registered in the agent's scope chain."""
        return bool(self._registry.pre_execute.listeners(self.scope_chain(agent)))

    def has_approver(self, agent: str | None = None) -> bool:
        """Whether an ``Ask`` for ``agent`` reaches a decider now: a channel of the caller's
        own is mounted, or the default service with policy ``"never"``, or with at least
        one ``approval/answer`` listener in the agent's scope chain. Without one, a caller
        that can pause (a Code-Mode run) defers the approval instead of failing the call."""
        channel = self._approval
        if channel is None:
            return False
        if isinstance(channel, ApprovalService):
            return channel.policy == "never" or bool(
                self._answerers.listeners(self.scope_chain(agent)))
        return True

    def mount_approval(self, policy: Literal["ask", "never"] = "ask") -> Callable[[], None]:
        """Mount the default ``ApprovalService`` with ``policy`` (logged as
        ``approval/policy``); answerers come from ``on("approval/answer", ...)``."""
        service = ApprovalService(
            append=self.log.append,
            turn_open=lambda: self._turn_open,
            answerers=self._answerers,
            policy=policy,
        )
        previous = self._approval
        self._approval = service
        self.log.append(ApprovalPolicyChanged(policy=policy))

        def dispose() -> None:
            if self._approval is service:
                self._approval = previous

        return dispose

    # -- turns ----------------------------------------------------------------------------
    @property
    def turn_open(self) -> bool:
        return self._turn_open

    @property
    def current_turn(self) -> int:
        return self._turn

    def begin_turn(self) -> int:
        """Open a turn (``turn/start``); returns its number. Raises if one is open."""
        if self._turn_open:
            raise RuntimeError("a turn is already open")
        self._turn += 1
        self._step = 0
        self._turn_open = True
        self.turn_concluded = False
        self.log.append(TurnStart(turn=self._turn))
        self._deliver_inbox()  # messages left pending by a cancelled turn come first
        return self._turn

    def end_turn(self, reason: str = "completed") -> None:
        """Close the open turn (``turn/end``). Pending inbox messages are delivered first,
        except for ``reason="cancelled"``: then they stay pending (durably) and are
        delivered right after the next ``turn/start``."""
        if not self._turn_open:
            raise RuntimeError("no turn is open")
        if reason != "cancelled":
            self._deliver_inbox()
        self.log.append(TurnEnd(turn=self._turn, reason=reason))
        self._turn_open = False

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[int]:
        """``async with session.turn() as n:`` — ``begin_turn`` / ``end_turn``; the end
        reason is ``"cancelled"`` on cancellation, ``"concluded"`` if a result concluded it."""
        number = self.begin_turn()
        reason = "completed"
        try:
            yield number
        except asyncio.CancelledError:
            reason = "cancelled"
            raise
        finally:
            if reason == "completed" and self.turn_concluded:
                reason = "concluded"
            self.end_turn(reason)

    def inject(self, message: Any, *, kind: str = "inject") -> None:
        """Queue a user-role message (string or blocks) in the next-step inbox."""
        for item in freeze_contexts([message]):
            self._queue(item, MessageSource(kind=kind), ())

    @property
    def inbox(self) -> list[UserMessageBody]:
        """Queued messages not yet delivered, in FIFO order."""
        return [body for body, _ in self._inbox]

    def clear_inbox(self) -> None:
        """Drop every pending message (an explicit cancel without "keep inbox")."""
        self._inbox.clear()

    def _queue(self, item: Any, source: MessageSource, seqs: tuple[int, ...]) -> None:
        content = ({"type": "text", "text": item},) if isinstance(item, str) else tuple(item)
        body = UserMessageBody(id=f"msg_{uuid.uuid4().hex[:16]}", source=source, content=content)
        self.log.append(InboxQueued(turn=self._turn, message=body, source_event_seqs=seqs))
        self._inbox.append((body, seqs))

    def _deliver_inbox(self) -> list[Event]:
        delivered: list[Event] = []
        inbox, self._inbox = self._inbox, []
        for body, seqs in inbox:
            delivered.append(
                self.log.append(UserMessage(turn=self._turn, message=body, source_event_seqs=seqs))
            )
        return delivered

    # -- calls ----------------------------------------------------------------------------
    async def execute(self, inp: ExecutionInput) -> CallResult:
        """One call S3–S14 (no ``tool/call``/``tool/result`` events); returns the frozen
        result the ``tools/result`` observers received."""
        return await self._registry.execute(inp)

    async def start(self, inp: ExecutionInput) -> PendingCall:
        """S3–S7 only; then ``await pending.dispatch()`` (S8–S10, may overlap with other
        calls) and ``await pending.commit()`` (S11–S14, in your commit order)."""
        return await self._registry.start(inp)

    def prepare(self, inp: ExecutionInput) -> PendingCall:
        """A pending call after S3, not yet started: ``await pending.start()`` runs S4–S7. A
        scheduler that may give up on a call (``pending.abandon(error)``) holds it from
        here, so even a call stuck in policy can be finalized and published."""
        return self._registry.prepare(inp)

    async def call(
        self,
        name: str,
        arguments: Any = None,
        *,
        agent: str | None = None,
        signal: Signal | None = None,
        call_id: str | None = None,
    ) -> CallResult:
        """One model tool call as a batch of one (see ``call_batch``)."""
        item = (
            (name, arguments if arguments is not None else {})
            if call_id is None
            else (name, arguments, call_id)
        )
        [result] = await self.call_batch([item], agent=agent, signal=signal)
        return result

    async def call_batch(
        self,
        calls: Iterable[tuple[Any, ...]],
        *,
        agent: str | None = None,
        signal: Signal | None = None,
        max_parallel: int | None = None,
    ) -> list[CallResult]:
        """Run one assistant message's tool calls (S0–S17) and return results in order.

        Each item is ``(name, arguments)`` or ``(name, arguments, call_id)``; ``arguments``
        is a parsed value or the model's raw JSON text (``""`` -> ``{}``, non-JSON text is
        passed on as the string). Concurrency-safe calls run in a rolling pool of
        ``max_parallel`` (default ``max_parallel_tool_calls``); any other call runs alone.
        S1–S7 run one call at a time in model order; ``tool/result`` commits in model
        order. Opens (and closes) a turn if none is open; the batch is one step. After
        the step's end marker the results' contexts are appended as ``user/message`` (FIFO).
        Cancelling the awaiting task aborts the batch: every call still gets its
        ``tool/result`` before ``CancelledError`` propagates.
        """
        items = [self._parse_item(raw) for raw in calls]
        cancel = Signal()
        batch_signal = Signal.any(signal, cancel) if signal is not None else cancel
        try:
            # The batch's first step (the turn, the step) runs now; its calls start at the
            # loop's next turn, so that batches started together (concurrent calls of tools
            # that never wait) still run at the same time and share the implicit turn.
            results: list[CallResult] = await shielded(
                self._batch(
                    items, agent, batch_signal, max_parallel or self.max_parallel_tool_calls
                ),
                cancel,
            )
            return results
        finally:
            batch_signal.detach()

    def _parse_item(self, raw: Any) -> tuple[str, str, Any, str]:
        if isinstance(raw, (tuple, list)) and len(raw) in (2, 3):
            name, arguments = raw[0], raw[1]
            call_id = raw[2] if len(raw) == 3 else f"call_{os.urandom(8).hex()}"
        else:
            raise TypeError("each call is (name, arguments) or (name, arguments, call_id)")
        if isinstance(arguments, str):
            text = arguments
            if not text.strip():
                parsed: Any = {}
            else:
                try:
                    parsed = msgspec.json.decode(text)
                except (msgspec.DecodeError, UnicodeEncodeError):
                    parsed = text
        else:
            parsed = arguments
            try:
                text = msgspec.json.encode(arguments).decode()
            except Exception:
                text = repr(arguments)
        if not text.isascii():  # the log is UTF-8: keep unpaired surrogates visible, not fatal
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        return str(name), text, parsed, str(call_id)

    def classify(
        self, name: str, arguments: Any, agent: str | None = None
    ) -> Literal["parallel", "exclusive"]:
        """``parallel`` only if the visible definition's classifier returns exactly ``True``."""
        defn = self.resolve(name, agent)
        if defn is None or defn.is_concurrency_safe is None:
            return "exclusive"
        try:
            verdict = defn.is_concurrency_safe(arguments)
        except BaseException:
            return "exclusive"
        return "parallel" if verdict is True else "exclusive"

    async def resume(
        self,
        run_id: str,
        decisions: Mapping[str, bool] | Iterable[ApprovalDecision],
        *,
        signal: Signal | None = None,
    ) -> CallResult:
        """Go on with a suspended call (docs/pipeline-spec.md §4.3): a call that returned a
        pending result and logged ``tool/suspended`` (a Code-Mode run waiting for approvals).

        The latest suspension of ``run_id`` is read from the log, so the run may have been
        suspended by another process. ``tool/resumed`` is appended (the log refuses a second
        resumption of one suspension: each approval is used once), then the tool is called
        again as a batch of one with call id ``"<run id>:resume:<k>"``, the suspended call's
        arguments, and ``ctx.resumption`` set; that call goes through the whole pipeline and
        gets its ``tool/call`` and ``tool/result`` like any other. It may suspend again.

        Args:
            run_id: the id of the run (its first call's id, as the pending result says).
            decisions: ``{request id: approved}`` or ``ApprovalDecision``s (a denial with a
                reason), one for every pending request.
            signal: cancels the resumed call.
        Returns:
            The resumed call's result (possibly pending again).
        Raises:
            ResumeError: no suspension of ``run_id`` is waiting, the decisions do not match
                its requests, or its tool is gone or not resumable.
        """
        suspended, resumed = find_suspension(self.log.read(), run_id)
        agent = suspended.agent if isinstance(suspended.agent, str) else None
        defn = self.resolve(suspended.name, agent)
        if defn is None or not defn.resumable:
            raise ResumeError(f'tool "{suspended.name}" of run {run_id!r} is not available '
                              "to resume it (not registered, or not resumable)")
        ordered = normalize_decisions(decisions, suspended.requests)
        call_id = f"{run_id}:resume:{resumed + 1}"
        self.log.append(ToolResumed(run_id=run_id, call_id=call_id, decisions=ordered))
        resumption = Resumption(run_id=run_id, call_id=call_id, state=suspended.state,
                                decisions=ordered, requests=suspended.requests)
        name, text, parsed, _ = self._parse_item((suspended.name, suspended.arguments, call_id))
        cancel = Signal()
        batch_signal = Signal.any(signal, cancel) if signal is not None else cancel
        try:
            results: list[CallResult] = await shielded(
                self._batch([(name, text, parsed, call_id)], agent, batch_signal, 1,
                            resumption=resumption),
                cancel,
            )
            return results[0]
        finally:
            batch_signal.detach()

    async def _batch(
        self, items: list[tuple[str, str, Any, str]], agent: str | None, signal: Signal,
        pool: int, *, resumption: Resumption | None = None,
    ) -> list[CallResult]:
        # A batch with no turn open opens one; batches running meanwhile (concurrent
        # `call`s on one session) join it, and the last to finish closes it, so no result
        # lands after the turn's end. Their steps overlap; each is closed by its batch.
        implicit = not self._turn_open or self._implicit_batches > 0
        if not self._turn_open:
            self.begin_turn()
            self._implicit_cancelled = False
        if implicit:
            self._implicit_batches += 1
        self._open_steps += 1
        self._step += 1
        turn, step = self._turn, self._step
        self.log.append(StepStart(turn=turn, step=step))
        concluded = False
        calls: dict[int, Event] = {}          # submission index -> its tool/call event

        def on_start(call: Scheduled) -> None:
            name, text, _, call_id = call.data
            calls[call.index] = self.log.append(
                ToolCall(turn=turn, step=step, call_id=call_id, name=name, arguments=text))

        async def on_commit(call: Scheduled) -> None:
            nonlocal concluded
            result = call.result
            assert result is not None
            call_id = call.data[3]
            committed = self.log.append(
                self._tool_result_event(turn, step, call_id, calls[call.index].seq, result))
            for context in result.additional_contexts:
                self._queue(
                    context, MessageSource(kind="context", call_id=call_id), (committed.seq,)
                )
            if result.concludes_turn and not result.is_error:
                concluded = True

        scheduler = Scheduler(
            self._registry.prepare, pool=pool, on_start=on_start, on_commit=on_commit,
            exclusive=lambda call: self.classify(call.data[0], call.data[2], agent) == "exclusive",
            abandons=False, loop=asyncio.get_running_loop())
        try:
            for item in items:
                name, _, parsed, call_id = item
                scheduler.submit(
                    ExecutionInput(call_id=call_id, name=name, arguments=parsed, signal=signal,
                                   agent=agent, resumption=resumption),
                    data=item, start=False)
            # The calls start at the loop's next turn, so that batches started together
            # (concurrent calls of tools that never wait) still run at the same time and
            # share the implicit turn; then in this task (`Scheduler.run`).
            await asyncio.sleep(0)
            done = await scheduler.run()
        finally:
            unsettled = [c.done for c in scheduler.calls if not c.done.done()]
            if unsettled:                 # (a turn of the loop; none when all are done)
                await asyncio.gather(*unsettled, return_exceptions=True)
            self.log.append(StepEnd(turn=turn, step=step))
            self._open_steps -= 1
            if not signal.aborted and self._open_steps == 0:
                # on cancellation they stay pending for the next turn; while another step is
                # open they wait for its end (never between the results of one step)
                self._deliver_inbox()
            if concluded:
                self.turn_concluded = True
            if implicit:
                self._implicit_batches -= 1
                self._implicit_cancelled = self._implicit_cancelled or signal.aborted
                if self._implicit_batches == 0:
                    reason = "cancelled" if self._implicit_cancelled else (
                        "concluded" if self.turn_concluded else "completed")
                    self.log.append(TurnEnd(turn=turn, reason=reason))
                    self._turn_open = False
        return [c.result for c in done if c.result is not None]

    @staticmethod
    def _tool_result_event(
        turn: int, step: int, call_id: str, call_seq: int, result: CallResult
    ) -> ToolResult:
        info = result.error.info if result.error is not None else None
        return ToolResult(
            turn=turn,
            step=step,
            message=ToolResultMessage(
                id=f"msg_{call_id}",
                source=MessageSource(kind="tool", call_id=call_id),
                content=(
                    ToolResultBlock(
                        tool_call_id=call_id, content=result.content, is_error=result.is_error
                    ),
                ),
            ),
            error=info if info is not None else msgspec.UNSET,
            meta=result.meta if result.meta is not None else msgspec.UNSET,
            source_event_seqs=(call_seq,),
        )

    async def code_dispatch_content(self, execution: Any, result: CallResult) -> tuple[Any, ...]:
        """The content to persist in a ``tool/code-dispatch`` event for a committed sub-call:
        ``result.content`` run through the ``tools/code-dispatch-log`` waterfall (e.g. a
        spill preview). A raising listener or malformed content is contained: the original
        content is logged (docs/pipeline-spec.md §11.4 step 6)."""
        scopes = self.scope_chain(getattr(execution, "agent", None))
        if not self._dispatch_log.applies(scopes):
            return result.content       # the committed result's content, frozen at S12
        try:
            content = await self._dispatch_log.run(
                (execution, result, result.content), lambda: result.content, scopes,
            )
            return freeze_blocks(content, what="logged content")
        except BaseException as exc:
            if own_cancellation(exc):
                raise
            _log.warning("tools/code-dispatch-log listener failed; logging the original content",
                         exc_info=True)
            return tuple(result.content)

    # -- presenters -----------------------------------------------------------------------
    def present_call(self, name: str, arguments: Any, *, agent: str | None = None) -> Any:
        """The pending card payload, or ``None`` for the generic card. Never raises."""
        try:
            defn = self.resolve(name, agent)
            if defn is None or defn.present_call is None:
                return None
            return snapshot(defn.present_call(arguments), what="presentation")
        except BaseException:
            return None

    def present_result(
        self, name: str, arguments: Any, projection: Any, *, agent: str | None = None
    ) -> Any:
        """The completed card payload from ``(arguments, {content, isError, meta})``, or
        ``None`` for the generic card. ``projection`` may be a ``CallResult``, a
        ``ToolResult`` event or the mapping itself. Never raises."""
        try:
            defn = self.resolve(name, agent)
            if defn is None or defn.present_result is None:
                return None
            if isinstance(projection, CallResult):
                projection = {
                    "content": list(projection.content),
                    "isError": projection.is_error,
                    "meta": projection.meta,
                }
            elif isinstance(projection, ToolResult):
                meta = projection.meta if projection.meta is not msgspec.UNSET else None
                projection = {"content": list(projection.content),
                              "isError": projection.is_error, "meta": meta}
            return snapshot(defn.present_result(arguments, FrozenDict(projection)),
                            what="presentation")
        except BaseException:
            return None

    # -- lifetime -------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Await pending observer work, then close the log."""
        await self._registry.drain()
        self.close()

    def close(self) -> None:
        """Close the log (idempotent)."""
        self.log.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
