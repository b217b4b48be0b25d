"""Values a program receives from its tools, as the run's wire carries them.

A sub-call's value crosses to the program as JSON. Values JSON cannot carry exactly (an
MCP tool's integer beyond 64 bits, NaN, the infinities, -0.0) travel tagged, as in the
run's final value (docs/sandbox.md, "The value"): `{"$int": "<digits>"}`,
`{"$float": "nan"}`; the guest (`sandbox/guest/cm_guest/tools.py`, `untag`) turns every
one-key dict whose key is one of `WIRE_TAGS` back into the Python value it stands for, at
any depth, on every tier. So a tool's own one-key dict whose key happens to be a tag
(`{"$int": "5"}`) is sent escaped, `{"$dict": [["$int", "5"]]}`, and arrives as that dict:
`escape` does it for the values of tools whose results are plain JSON, and the MCP client
(`_mcp/values.lossless`) for the values it tags. `mark_tagged` records the tools whose
values are already in the tagged form (the MCP client's), so they are not escaped again.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["WIRE_TAGS", "escape", "is_tagged", "mark_tagged"]

WIRE_TAGS = frozenset({"$int", "$float", "$dict"})
"""The tags the guest turns back into values in a sub-call's value."""

_TAGGED: weakref.WeakSet[Callable[..., Any]] = weakref.WeakSet()


def mark_tagged(execute: Callable[..., Any]) -> None:
    """Record that the tool whose body is `execute` returns values already tagged (and
    escaped) for the wire."""
    _TAGGED.add(execute)


def is_tagged(execute: Callable[..., Any] | None) -> bool:
    """True for a tool body recorded by `mark_tagged`."""
    try:
        return execute is not None and execute in _TAGGED
    except TypeError:            # not weakly referenceable: never marked
        return False


def escape(value: Any) -> Any:
    """`value` (plain JSON) with each one-key dict whose key is in `WIRE_TAGS` written as
    `{"$dict": [[key, value]]}`, at any depth; the same object when there is none."""
    if isinstance(value, list):
        items = [escape(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if not isinstance(value, dict):
        return value
    inner = {key: escape(item) for key, item in value.items()}
    if len(inner) == 1 and next(iter(inner)) in WIRE_TAGS:
        [(key, item)] = inner.items()
        return {"$dict": [[key, item]]}
    if all(inner[key] is item for key, item in value.items()):
        return value
    return inner
