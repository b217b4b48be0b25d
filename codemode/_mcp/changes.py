"""`notifications/tools/list_changed` for the clients of `codemode serve` (`serve`): when
what `tools/list` would answer differs from what a client was last told (`run_code`'s
description follows the session's tools, which follow the upstream servers' listings), each
client still connected is notified once, and lists again when it wants.

Clients are the MCP sessions that sent `tools/list` or `tools/call` (every client lists
before it calls); they are held weakly, so a client that has left is forgotten. A session's
`tools/changed` fires once per tool registered or removed: the comparison runs once per
turn of the event loop, after the burst.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable
from typing import Any

_log = logging.getLogger("codemode.serve")


class ListChanges:
    """Tells clients that the tool list changed.

    Args:
        listing: what `tools/list` answers now (compared with what was last answered).
    """

    def __init__(self, listing: Callable[[], list[Any]]) -> None:
        self._listing = listing
        self._clients: weakref.WeakSet[Any] = weakref.WeakSet()
        self._last: list[Any] | None = None
        self._pending = False
        self._sends: set[asyncio.Task[None]] = set()

    def client(self, session: Any) -> None:
        """Remember the MCP server session `session` as a client to notify."""
        self._clients.add(session)

    def listed(self, session: Any, tools: list[Any]) -> None:
        """`session` was just answered `tools` by `tools/list`."""
        self._clients.add(session)
        self._last = tools

    def changed(self, _session: Any = None) -> None:
        """The pipeline session's `tools/changed` listener: compare soon (once per burst)."""
        if self._pending or not self._clients:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:                 # no loop: no client is being served
            return
        self._pending = True
        loop.call_soon(self._compare)

    def _compare(self) -> None:
        self._pending = False
        tools = self._listing()
        if tools == self._last:
            return
        self._last = tools
        for client in list(self._clients):
            task = asyncio.ensure_future(self._notify(client))
            self._sends.add(task)
            task.add_done_callback(self._sends.discard)

    async def _notify(self, client: Any) -> None:
        try:
            await client.send_tool_list_changed()
        except Exception as exc:             # the client has gone: forget it
            _log.debug("tools/list_changed not sent: %s", exc)
            self._clients.discard(client)
