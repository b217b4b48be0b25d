"""A final value cut to fit `SandboxLimits.output_bytes` (docs/sandbox.md, "A value over its
limit").

A value whose JSON is larger than `output_bytes` (and at most `output_cap_bytes`, past which
the run ends) is kept whole in `RunOutcome.full.value`; `RunOutcome.value` is `cut_value` of
it: the same shape, its start kept, what was left out marked where it was:

- a list (or the items of a `$tuple`, `$set`, `$frozenset`) keeps its first items, then
  one `{"$cut": "N more items"}`; a `$dict`'s pairs end with `[{"$cut": "N more items"},
  null]`;
- a dict keeps its first keys, then `"$cut": "N more keys"`;
- a string (and the text of a `$repr` or `$cut`) keeps its first characters, then
  `… [N more characters]`;
- a `$int`, `$bytes` or `$bytearray` too large for what is left becomes
  `{"$cut": "$bytes of N characters"}`; anything nested deeper than `MAX_CUT_DEPTH`
  becomes `{"$cut": "nested too deeply to show"}`.

So the result is still the lossless encoding (`decode_value` reads it) and reads as the
start of the value, which is all the model is shown of it anyway.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ._values import _tags

__all__ = ["cut_value"]

MAX_CUT_DEPTH = 200
"""Levels of nesting a cut value keeps (the walk recurses once per level)."""

_TEXT_TAGS = frozenset({"$repr", "$cut"})
_LIST_TAGS = frozenset({"$tuple", "$set", "$frozenset"})
_encode = msgspec.json.Encoder().encode


def cut_value(value: Any, limit_bytes: int) -> Any:
    """`value` (JSON in the lossless encoding) cut so that its JSON is at most
    `limit_bytes` bytes (see the module docstring); `value` itself is not changed.

    Sizes are estimated while walking and the result is measured: the walk is tried again
    with a smaller budget when the estimate was short (rare: text heavy in escapes)."""
    budget = limit_bytes
    for _ in range(4):
        cut = _Cutter(budget).walk(value, 0)
        size = len(_encode(cut))
        if size <= limit_bytes:
            return cut
        budget = max(budget * limit_bytes // size - 64, 0)
    return {"$cut": f"a value of more than {limit_bytes} bytes of JSON"}


class _Cutter:
    def __init__(self, budget: int) -> None:
        self.left = budget

    def walk(self, v: Any, depth: int) -> Any:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, (list, dict)) and depth >= MAX_CUT_DEPTH:
            self.left -= 40
            return {"$cut": "nested too deeply to show"}
        if isinstance(v, list):
            return self.items(v, depth)
        if isinstance(v, dict):
            return self.mapping(v, depth)
        self.left -= len(_encode(v))
        return v

    def text(self, v: str) -> str:
        size = len(v) + 2
        if size <= self.left:
            self.left -= size
            return v
        keep = max(self.left - 40, 0)
        self.left = 0
        return f"{v[:keep]}… [{len(v) - keep} more characters]"

    def items(self, v: list[Any], depth: int, pairs: bool = False) -> list[Any]:
        self.left -= 2
        out: list[Any] = []
        for i, item in enumerate(v):
            if self.left <= 0:
                marker = {"$cut": f"{len(v) - i} more items"}
                out.append([marker, None] if pairs else marker)
                break
            out.append(self.walk(item, depth + 1))
            self.left -= 1
        return out

    def mapping(self, v: dict[str, Any], depth: int) -> Any:
        if len(v) == 1:
            [(tag, body)] = v.items()
            if tag in _tags():
                return self.tagged(tag, body, depth)
        self.left -= 2
        out: dict[str, Any] = {}
        for i, (key, item) in enumerate(v.items()):
            if self.left <= 0:
                out["$cut"] = f"{len(v) - i} more keys"
                break
            self.left -= len(key) + 4
            out[key] = self.walk(item, depth + 1)
        return out

    def tagged(self, tag: str, body: Any, depth: int) -> Any:
        self.left -= len(tag) + 5
        if tag in _LIST_TAGS and isinstance(body, list):
            return {tag: self.items(body, depth + 1)}
        if tag == "$dict" and isinstance(body, list):
            return {tag: self.items(body, depth + 1, pairs=True)}
        if tag in _TEXT_TAGS and isinstance(body, str):
            return {tag: self.text(body)}
        size = len(_encode(body))
        if size <= self.left:
            self.left -= size
            return {tag: body}
        self.left = 0
        return {"$cut": f"{tag} of {size} characters"}
