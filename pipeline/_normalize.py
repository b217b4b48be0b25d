"""Turning anything thrown into a failed ``CallResult`` (docs/pipeline-spec.md §5)."""

from __future__ import annotations

import asyncio
from typing import Any

from ._errors import HarnessError, HookError, ToolExitError
from ._result import CallResult, ToolErrorDetail, text_block
from .events import ErrorInfo

__all__ = [
    "UNPRINTABLE",
    "body_failure",
    "describe_thrown",
    "error_info",
    "failure_from",
    "listener_failure",
    "message_of",
]

UNPRINTABLE = "<unprintable error>"


def message_of(thrown: Any) -> str:
    """The message of an arbitrary thrown value; never raises.

    An exception's message (``.message`` of a ``HarnessError``, else ``str(exc)`` —
    prefixed by the class for a ``KeyError``, whose text is only the key: ``KeyError: 'x'``
    —, else its first string argument, else the class name); for other values a string ``message``
    attribute or key, else ``str(value)``; if all of that fails, ``"<unprintable error>"``.
    """
    kind = type(thrown)  # type() never runs user code; isinstance() may (__class__)
    if issubclass(kind, BaseException):
        return _exception_message(thrown)
    if type(thrown) is str:
        return thrown
    try:
        msg = getattr(thrown, "message", None)
        if type(msg) is str:
            return msg
        if issubclass(kind, dict):
            msg = dict.get(thrown, "message")
            if type(msg) is str:
                return msg
        text = str(thrown)
        if type(text) is str:
            return text
    except Exception:
        pass
    return UNPRINTABLE


def _exception_message(exc: BaseException) -> str:
    try:
        if isinstance(exc, HarnessError) and type(exc.message) is str:
            return exc.message
    except Exception:
        pass
    try:
        text = str(exc)
        if type(text) is str and text:
            # A KeyError's text is only the key's repr (`'x'`): it needs its class to read.
            return f"{type(exc).__name__}: {text}" if isinstance(exc, KeyError) else text
    except Exception:
        pass
    try:
        args = exc.args
        if args and type(args[0]) is str and args[0]:
            return args[0]
    except Exception:
        pass
    try:
        return type(exc).__name__
    except Exception:
        return UNPRINTABLE


def error_info(thrown: Any) -> ErrorInfo | None:
    """``{name, code}`` for a typed harness error, else ``None``; never raises."""
    try:
        if issubclass(type(thrown), HarnessError):
            code, name = thrown.code, thrown.name
            if type(code) is str and code and type(name) is str and name:
                return ErrorInfo(name=name, code=code)
    except Exception:
        pass
    return None


def failure_from(thrown: Any, *, additional_contexts: tuple[Any, ...] = ()) -> CallResult:
    """A registry-made failure for ``thrown``: content ``[text "Error: <message>"]``."""
    message = message_of(thrown)
    if not message.isascii():
        message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return CallResult(
        is_error=True,
        content=(text_block(f"Error: {message}"),),
        error=ToolErrorDetail(message=message, info=error_info(thrown)),
        additional_contexts=additional_contexts,
    )


def describe_thrown(thrown: BaseException) -> str:
    """``SystemExit(2)``, ``KeyboardInterrupt``, ``LookupError: no such key``: the class
    and what it carries, for messages about a thrown ``BaseException``; never raises."""
    try:
        name = type(thrown).__name__
    except Exception:  # pragma: no cover - type() never fails in practice
        return UNPRINTABLE
    if isinstance(thrown, SystemExit):
        try:
            return f"{name}({thrown.code!r})"
        except Exception:
            return name
    message = message_of(thrown)
    return name if message in ("", name) else f"{name}: {message}"


def body_failure(thrown: BaseException, tool_name: str) -> CallResult:
    """The failure for whatever a tool body (or its ``finalize_content``) raised.

    An ``Exception`` (``CancelledError`` included) keeps its message and, if typed, its
    code. Any other ``BaseException`` (``SystemExit`` from ``sys.exit`` or ``argparse``,
    ``KeyboardInterrupt``, ``GeneratorExit``, a class of its own) is contained as
    ``TOOL_EXITED``: ``tool "<name>" raised SystemExit(2)``.
    """
    if isinstance(thrown, (Exception, asyncio.CancelledError)) or error_info(thrown) is not None:
        return failure_from(thrown)
    return failure_from(ToolExitError(f'tool "{tool_name}" raised {describe_thrown(thrown)}'))


def listener_failure(thrown: BaseException, where: str) -> CallResult:
    """The failure for whatever a listener, wrapper, guard or hook raised (``where`` names
    the extension point, e.g. ``"a tools/pre-execute listener"``).

    A typed error keeps its code (``HOOK_TIMEOUT``, ``ABORTED``, ``APPROVAL_FAILED``, ...);
    anything else becomes ``HOOK_FAILED``, so the failure is never mistaken for the tool's.
    The message is the exception's own; a ``BaseException`` that is not an ``Exception``
    is named: ``a tools/post-execute listener raised SystemExit(3)``.
    """
    if error_info(thrown) is not None:
        return failure_from(thrown)
    if isinstance(thrown, Exception):
        return failure_from(HookError(message_of(thrown)))
    return failure_from(HookError(f"{where} raised {describe_thrown(thrown)}"))
