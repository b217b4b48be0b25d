"""Content blocks and additional contexts: validation into frozen form."""

from __future__ import annotations

from typing import Any

import msgspec

from ._errors import NotLosslessError
from ._lossless import FrozenDict, FrozenList, snapshot

__all__ = ["blocks_text", "default_content", "default_render", "freeze_blocks", "freeze_contexts"]


def freeze_blocks(blocks: Any, *, what: str = "content") -> tuple[FrozenDict, ...]:
    """Validate content blocks and return them as a tuple of frozen dicts.

    Accepts a list/tuple of blocks, each a mapping with a string ``type`` (``text`` blocks
    need a string ``text``), or a bare string (one text block).

    Raises:
        NotLosslessError: not lossless JSON, or not a list of well-formed blocks.
    """
    if isinstance(blocks, str):
        return (FrozenDict(type="text", text=blocks),)
    if type(blocks) is tuple:
        blocks = list(blocks)
    frozen = snapshot(blocks, what=what)
    if not isinstance(frozen, list):
        raise NotLosslessError(f"{what} must be a list of content blocks")
    for index, block in enumerate(frozen):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise NotLosslessError(f'{what}[{index}] must be a content block with a string "type"')
        if block["type"] == "text" and not isinstance(block.get("text"), str):
            raise NotLosslessError(f'{what}[{index}] is a text block without a string "text"')
    return tuple(frozen)


def freeze_contexts(contexts: Any, *, what: str = "additional context") -> tuple[Any, ...]:
    """Each context is a string or a list of content blocks; returns a tuple of
    ``str`` / ``FrozenList`` of blocks. Raises ``NotLosslessError``."""
    if contexts is None:
        return ()
    if isinstance(contexts, str):
        contexts = [contexts]
    out: list[Any] = []
    for item in contexts:
        if isinstance(item, str):
            out.append(str(item))
        elif not isinstance(item, (list, tuple)):
            raise NotLosslessError(f"{what} must be a string or a list of content blocks")
        else:
            out.append(FrozenList(freeze_blocks(item, what=what)))
    return tuple(out)


def blocks_text(blocks: Any) -> str:
    """Text of the text blocks joined by newlines; other blocks as ``[<type>]``."""
    parts = []
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append(block.get("text", ""))
        else:
            parts.append(f"[{kind or 'block'}]")
    return "\n".join(parts)


def default_render(value: Any) -> list[dict[str, Any]]:
    """A string is shown raw; any other JSON value pretty-printed (2-space indent)."""
    return [{"type": "text", "text": _default_text(value)}]


def default_content(frozen: Any) -> tuple[FrozenDict, ...]:
    """``freeze_blocks(default_render(frozen))`` for a value already snapshotted: the one
    text block, frozen as it is made (its text is a lossless string: the value's own, or
    the JSON of a lossless value)."""
    return (FrozenDict(type="text", text=_default_text(frozen)),)


_UNSHAPED = (int, float, bool, type(None))


def _default_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    encoded = msgspec.json.encode(value)
    if type(value) not in _UNSHAPED:        # (indent shapes containers only)
        encoded = msgspec.json.format(encoded, indent=2)
    return encoded.decode()
