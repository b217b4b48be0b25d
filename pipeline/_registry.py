"""The tool registry: the definitions in their scopes, the extension points, and the way in
for one call through S3–S14 (docs/pipeline-spec.md §2–§7): ``prepare`` makes its
``PendingCall`` (``_pending``, where the pipeline's composition is drawn), ``execute`` runs
it through, ``publish`` is its S14.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any, Literal

import msgspec

from ._approval import ApprovalChannel
from ._definition import ToolDefinition
from ._execution import Execution, ExecutionInput
from ._pending import PendingCall
from ._result import CallResult
from ._shield import shielded
from ._signal import Signal
from ._waterfall import Registration, Waterfall

__all__ = ["PendingCall", "ToolRegistry"]

_log = logging.getLogger("codemode.pipeline")

Mode = Literal["native", "code", "both"]


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
        self.direct: Callable[[str], bool] | None = None     # None: every visible tool
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

    def direct_reach(self, name: str) -> bool:
        """Whether a direct call (no parent) may reach ``name``: the reserved tool, or a
        name ``direct`` admits (None admits every name)."""
        return self.direct is None or self.direct(name) or self.is_reserved(name)

    def offered(self, agent: str | None) -> list[ToolDefinition]:
        """What the model is offered for ``agent``, in order (``Session.model_tools``):
        ``native``: the visible tools ``direct`` admits; ``code``: the reserved tool alone;
        ``both``: those tools, then the reserved tool."""
        mode = self.mode_for(agent)
        offered = [] if mode == "code" else [
            d for d in self.visible(agent) if self.direct is None or self.direct(d.name)]
        if mode != "native" and self.reserved is not None:
            offered.append(self.reserved)
        return offered

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
