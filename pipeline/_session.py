"""``Session``: tools, extension points, the log, turns and batches (docs/pipeline-spec.md §2, §8).

This module holds what a call reads: the agents and their modes, the tools in their scopes,
the extension points, approval, presentation; and the session's making and closing. The
model's calls in batches are ``_batches``, the turns and inbox they are logged in ``_turns``;
``Session`` is all of them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import Any, Literal

import msgspec

from ._approval import ApprovalChannel, ApprovalService
from ._batches import Batches
from ._content import freeze_blocks
from ._definition import ToolDefinition
from ._errors import DuplicateToolError, ReservedToolError
from ._execution import ExecutionInput
from ._lossless import FrozenDict, snapshot
from ._pending import PendingCall
from ._registry import Mode, ToolRegistry
from ._result import CallResult
from ._shield import own_cancellation
from ._waterfall import Waterfall, registry_list
from .events import ApprovalPolicyChanged, ToolResult, UserMessageBody
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


class Session(Batches):
    """A tool session: registry, extension points, approval, log, turns and batches.

    Args:
        tools: definitions registered globally, in order.
        log: ``None`` (in memory, not chosen: ``log_chosen``), a path (``.db``/``.sqlite``
            SQLite, ``.jsonl`` JSONL) or a ``SessionLog`` (``MemoryLog()``: in memory, on
            purpose). An existing log is repaired on open.
        mode: the presentation mode, ``"native"``, ``"code"`` or ``"both"``; ``None`` (the
            default): not chosen, so the session has its default mode, ``"native"`` unless
            a component changes it (``set_default_mode``: Code Mode's ``run_code`` makes it
            ``"code"``). A mode given here or with ``set_mode`` always wins.
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
        mode: Mode | None = None,
        approval: Literal["ask", "never"] | ApprovalChannel | None = None,
        max_parallel_tool_calls: int = 10,
        reserved_name: str = "run_code",
    ) -> None:
        if mode is not None and mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, not {mode!r}")
        if max_parallel_tool_calls < 1:
            raise ValueError("max_parallel_tool_calls must be >= 1")
        self.log: SessionLog = open_log(log)
        self._log_chosen = log is not None
        self.max_parallel_tool_calls = max_parallel_tool_calls
        self._mode: Mode | None = mode          # None: not chosen
        self._default_mode: Mode = "native"
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
        """The session's mode: the one chosen (the constructor's ``mode``, ``set_mode``),
        else the default (``set_default_mode``; ``"native"`` at first)."""
        return self._mode if self._mode is not None else self._default_mode

    @property
    def mode_chosen(self) -> bool:
        """Whether the session's mode was chosen (the constructor's ``mode``, or
        ``set_mode`` for the session), rather than left to its default."""
        return self._mode is not None

    @property
    def log_chosen(self) -> bool:
        """Whether the session was given a log (a path or a ``SessionLog``, an explicit
        ``MemoryLog()`` included) rather than ``log=None``, the in-memory log nobody chose
        (a component that would leave records only a log file keeps, such as a run paused
        for approval, may refuse it)."""
        return self._log_chosen

    def set_mode(self, mode: Mode, *, agent: str | None = None) -> Callable[[], None]:
        """Select a mode for the session (``agent=None``) or one agent (inherited by its
        descendants); return a disposer restoring the previous setting (for the session,
        possibly "not chosen"). A mode chosen for the session wins over its default."""
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

    def set_default_mode(self, mode: Mode) -> Callable[[], None]:
        """Set the mode the session has while none is chosen (``Session(mode=None)`` and no
        ``set_mode`` for it): what a component that installs the reserved router uses, so
        that the model is offered what the component is for (Code Mode's ``run_code`` sets
        ``"code"``) while a user's choice, made before or after, wins. Fires
        ``tools/changed``. Returns a disposer restoring the previous default.

        Raises:
            ValueError: not a mode.
        """
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, not {mode!r}")
        previous = self._default_mode
        self._default_mode = mode
        self._notify_changed()

        def dispose() -> None:
            if self._default_mode == mode:
                self._default_mode = previous
                self._notify_changed()

        return dispose

    def mode_for(self, agent: str | None) -> Mode:
        """The nearest explicit mode in the agent's scope chain, else the session's."""
        for scope in reversed(self.scope_chain(agent)):
            if scope is not None and scope in self._agent_modes:
                return self._agent_modes[scope]
        return self.mode

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
        plus the reserved tool. The visible tools are those ``set_direct_tools`` admits."""
        return [d.model_schema() for d in self._registry.offered(agent)]

    @property
    def direct_tools(self) -> Callable[[str], bool] | None:
        """Whether ``set_direct_tools`` admits a name for direct calls (None: every name)."""
        return self._registry.direct

    def set_direct_tools(
        self, names: Iterable[str] | Callable[[str], bool] | None
    ) -> Callable[[], None]:
        """Narrow the tools the model is offered and may call directly (modes ``native`` and
        ``both``) to ``names``: ``model_tools`` lists only those, and a direct call (no
        ``parent``) of any other name is handled like a name visible nowhere (it reaches
        policy, then fails ``UNKNOWN_TOOL`` at dispatch, suggesting only offered names).
        The reserved tool and sub-calls (whose caller passes ``reachable``) are not
        narrowed. ``None``: every visible tool. Code Mode's ``run_code`` narrows them to the
        tools it exposes (``CodeMode(expose=...)``, a policy's ``expose``). Fires
        ``tools/changed``. Returns a disposer restoring the previous set."""
        reg = self._registry
        chosen = (names if names is None or callable(names)
                  else frozenset(names).__contains__)
        previous = reg.direct
        reg.direct = chosen
        self._notify_changed()

        def dispose() -> None:
            if reg.direct is chosen:
                reg.direct = previous
                self._notify_changed()

        return dispose

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
