"""Waterfalls: listeners in registration order, each deciding or delegating (STYLE §6).

A listener is called as ``listener(*args, next)``. It either returns a value (or an
awaitable of one) — which becomes the waterfall's result as seen by the listener before it —
or returns/awaits ``next()``, the rest of the chain. The innermost ``next()`` is the
waterfall's default. Registration order is composition order: the first registered listener
is the outermost. The chain is captured when a run starts; changes apply to later runs.

Agent scoping: a listener registered with ``agent="a"`` only runs for calls whose agent is
``"a"`` or one of its descendants (see ``Session.add_agent``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

__all__ = ["Registration", "Waterfall"]

T = TypeVar("T")


class Registration:
    """One registration; its identity is what the disposer removes."""

    __slots__ = ("agent", "fn")

    def __init__(self, fn: Callable[..., Any], agent: str | None) -> None:
        self.fn = fn
        self.agent = agent

    def applies(self, scopes: tuple[str | None, ...]) -> bool:
        return self.agent is None or self.agent in scopes


def registry_list(
    point: str, items: list[Registration], fn: Any, agent: str | None
) -> Callable[[], None]:
    """Append a registration; return an idempotent disposer."""
    if not callable(fn):
        raise TypeError(f"{point}: {fn!r} is not callable")
    reg = Registration(fn, agent)
    items.append(reg)

    def dispose() -> None:
        if reg in items:
            items.remove(reg)

    return dispose


class Waterfall(Generic[T]):
    """An ordered chain of listeners for one extension point."""

    def __init__(self, point: str) -> None:
        self.point = point
        self._chain: list[Registration] = []

    def register(self, fn: Callable[..., Any], *, agent: str | None = None) -> Callable[[], None]:
        """Append ``fn`` (sync or async); return an idempotent disposer."""
        return registry_list(self.point, self._chain, fn, agent)

    def listeners(self, scopes: tuple[str | None, ...] = (None,)) -> tuple[Callable[..., Any], ...]:
        return tuple(reg.fn for reg in self._chain if reg.applies(scopes))

    def __len__(self) -> int:
        return len(self._chain)

    def applies(self, scopes: tuple[str | None, ...] = (None,)) -> bool:
        """Whether any listener runs for ``scopes`` (else ``run`` is just the default)."""
        return bool(self._chain) and any(reg.applies(scopes) for reg in self._chain)

    async def run(
        self,
        args: tuple[Any, ...],
        default: Callable[[], Awaitable[T]] | Callable[[], T],
        scopes: tuple[str | None, ...] = (None,),
    ) -> T:
        """Run the chain; ``default()`` is the innermost step (sync or async)."""
        chain = self.listeners(scopes) if self._chain else ()
        if not chain:                  # nothing registered for these scopes: the default
            out: Any = default()
            if inspect.isawaitable(out):
                out = await out
            return out  # type: ignore[no-any-return]

        async def step(index: int) -> T:
            if index == len(chain):
                out = default()
            else:
                out = chain[index](*args, lambda: step(index + 1))
            if inspect.isawaitable(out):
                out = await out
            return out

        return await step(0)
