"""Turning anything thrown into a failed ``CallResult`` (PIPELINE.md §5)."""

from __future__ import annotations

from typing import Any

from ._errors import HarnessError
from ._result import CallResult, ToolErrorDetail, text_block
from .events import ErrorInfo

__all__ = ["UNPRINTABLE", "error_info", "failure_from", "message_of"]

UNPRINTABLE = "<unprintable error>"


def message_of(thrown: Any) -> str:
    """The message of an arbitrary thrown value; never raises.

    An exception's message (``.message`` of a ``HarnessError``, else ``str(exc)``, else the
    class name when that is empty); else a string ``message`` attribute; else ``str(thrown)``;
    if all of that fails, ``"<unprintable error>"``.
    """
    try:
        if isinstance(thrown, HarnessError):
            msg = thrown.message
            if isinstance(msg, str):
                return msg
        if isinstance(thrown, BaseException):
            text = str(thrown)
            if type(text) is str and text:
                return text
            return type(thrown).__name__
        if isinstance(thrown, str):
            return str.__str__(thrown)
        try:
            msg = getattr(thrown, "message", None)
        except Exception:
            msg = None
        if type(msg) is str:
            return msg
        if isinstance(thrown, dict):
            msg = thrown.get("message")
            if type(msg) is str:
                return msg
        text = str(thrown)
        if type(text) is str:
            return text
    except Exception:
        pass
    return UNPRINTABLE


def error_info(thrown: Any) -> ErrorInfo | None:
    """``{name, code}`` for a typed harness error, else ``None``; never raises."""
    try:
        if isinstance(thrown, HarnessError):
            code, name = thrown.code, thrown.name
            if type(code) is str and code and type(name) is str and name:
                return ErrorInfo(name=name, code=code)
    except Exception:
        pass
    return None


def failure_from(thrown: Any, *, additional_contexts: tuple[Any, ...] = ()) -> CallResult:
    """A registry-made failure for ``thrown``: content ``[text "Error: <message>"]``."""
    message = message_of(thrown)
    return CallResult(
        is_error=True,
        content=(text_block(f"Error: {message}"),),
        error=ToolErrorDetail(message=message, info=error_info(thrown)),
        additional_contexts=additional_contexts,
    )
