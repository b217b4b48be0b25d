"""``CallResult``: the frozen, discriminated outcome of one call (docs/pipeline-spec.md §1.4)."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from ._lossless import FrozenDict
from .events import ErrorInfo

__all__ = ["CallResult", "ToolErrorDetail", "text_block"]


def text_block(text: str) -> dict[str, Any]:
    """``{"type": "text", "text": text}`` (frozen)."""
    return FrozenDict(type="text", text=text)


class ToolErrorDetail(msgspec.Struct, frozen=True, kw_only=True):
    """``error`` of a failed result: the bare ``message`` and, for typed errors, ``info``.

    ``traceback``: for an exception the tool's body raised (not a typed ``HarnessError``),
    its formatted traceback (``traceback.format_exception``), for the developer: written to
    the log's result event, never to ``content``, the model or a program. ``None`` otherwise.
    """

    message: str
    info: ErrorInfo | None = None
    traceback: str | None = None

    @property
    def code(self) -> str | None:
        return self.info.code if self.info is not None else None


class CallResult(msgspec.Struct, frozen=True, kw_only=True):
    """Outcome of one call.

    Success: ``is_error=False``, ``value`` (canonical JSON, frozen), ``content`` rendered from
    it, optional ``meta`` (top-level calls only), ``concludes_turn`` possibly ``True``.
    Failure: ``is_error=True``, ``value`` is ``msgspec.UNSET``, ``error`` set, ``content`` (for
    registry-made failures one text block ``"Error: <message>"``), ``concludes_turn=False``.

    Attributes:
        content: tuple of content blocks (``{"type": "text", "text": ...}`` and others).
        meta: presentation payload (JSON) or ``None`` when absent.
        denied: ``True`` for a policy denial (pre-execute deny, approval non-grant, guard,
            post-execute block); such failures carry no ``error.info``.
        additional_contexts: user-role messages to deliver after the result, each a string
            or a tuple of content blocks, in order.
    """

    is_error: bool
    content: tuple[Any, ...] = ()
    value: Any | UnsetType = UNSET
    error: ToolErrorDetail | None = None
    meta: Any = None
    additional_contexts: tuple[Any, ...] = ()
    concludes_turn: bool = False
    denied: bool = False

    @classmethod
    def success(
        cls,
        value: Any,
        content: Any = None,
        *,
        meta: Any = None,
        additional_contexts: tuple[Any, ...] | list[Any] = (),
        concludes_turn: bool = False,
    ) -> CallResult:
        """A success candidate (e.g. a wrapper short-circuit). The registry revalidates and
        re-renders it against the tool's definition, so ``content``/``meta`` given here are
        only kept when the registry itself made the result."""
        return cls(
            is_error=False,
            value=value,
            content=tuple(content or ()),
            meta=meta,
            additional_contexts=tuple(additional_contexts),
            concludes_turn=concludes_turn,
        )

    @classmethod
    def failure(
        cls,
        message: str,
        *,
        code: str | None = None,
        name: str | None = None,
        content: Any = None,
        meta: Any = None,
        additional_contexts: tuple[Any, ...] | list[Any] = (),
        denied: bool = False,
    ) -> CallResult:
        """A failure; ``content`` defaults to ``[text "Error: <message>"]``; ``info`` is set
        only when ``code`` is given (``name`` defaults to ``"ToolError"``)."""
        info = ErrorInfo(name=name or "ToolError", code=code) if code is not None else None
        return cls(
            is_error=True,
            content=tuple(content) if content is not None else (text_block(f"Error: {message}"),),
            error=ToolErrorDetail(message=message, info=info),
            meta=meta,
            additional_contexts=tuple(additional_contexts),
            denied=denied,
        )

    @property
    def text(self) -> str:
        """The text blocks of ``content`` joined by newlines (convenience for callers)."""
        return "\n".join(
            block.get("text", "") for block in self.content
            if isinstance(block, dict) and block.get("type") == "text"
        )
