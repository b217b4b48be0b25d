"""Shared by the SDK adapter tests: a session on the built-in toolset and a canned HTTP
server for an SDK client (the SDK's own transport, no network)."""

from __future__ import annotations

import json
from typing import Any

import httpx2

from codemode import CodeMode, Session
from codemode.fixtures.toolset import builtin_tools

ORDERS_PROGRAM = ('ids = list_orders(customer="ada@example.com")\nprint(ids)\n'
                  'sum(get_order(order_id=i)["total"] for i in ids)')
ORDERS_TEXT = "['ord-1001', 'ord-1002', 'ord-1004']\n170.75\n[4 tool calls]"
FAILING_PROGRAM = "get_order(order_id='nope')"


def code_mode_session() -> Session:
    """The built-in toolset in code mode: the model is offered `run_code` alone."""
    session = Session(tools=builtin_tools(), mode="code")
    CodeMode(session)
    return session


class CannedApi:
    """An `httpx2.MockTransport` answering each request with the next canned JSON body and
    keeping the JSON of every request it got."""

    def __init__(self, *bodies: dict[str, Any]) -> None:
        self.bodies = list(bodies)
        self.requests: list[dict[str, Any]] = []

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self._answer))

    def _answer(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(json.loads(request.content))
        return httpx2.Response(200, json=self.bodies.pop(0))
