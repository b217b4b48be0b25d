"""A session's turns and its inbox, as the log records them (docs/pipeline-spec.md §8.2,
§10): ``turn/start`` and ``turn/end``, messages queued (``inbox/queued``) and delivered as
``user/message`` outside steps, and what a reopened log says of both.

Separate from the session's tools and policy: this is the conversation's frame that the
calls' events go into (``_batches``); ``Session.__init__`` sets its state.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from ._content import freeze_contexts
from .events import (
    Event,
    InboxQueued,
    MessageSource,
    TurnEnd,
    TurnStart,
    UserMessage,
    UserMessageBody,
)
from .log import SessionLog

__all__ = ["Turns"]


class Turns:
    """The turns and the inbox of a ``Session``."""

    # set by ``Session.__init__``
    log: SessionLog
    turn_concluded: bool
    _inbox: list[tuple[UserMessageBody, tuple[int, ...]]]
    _turn: int
    _turn_open: bool
    _step: int

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
