"""Turning anything thrown into a failed ``CallResult`` (docs/pipeline-spec.md §5)."""

from __future__ import annotations

import asyncio
import logging
import traceback as _traceback
from typing import Any

import msgspec

from ._errors import HarnessError, HookError, ToolExitError
from ._result import CallResult, ToolErrorDetail, text_block
from .events import ErrorInfo

__all__ = [
    "TOOLS_LOGGER",
    "UNPRINTABLE",
    "body_failure",
    "describe_thrown",
    "error_info",
    "failure_from",
    "listener_failure",
    "message_of",
    "shown_traceback",
    "traceback_of",
]

UNPRINTABLE = "<unprintable error>"

#: the logger a tool body's exception is recorded on (INFO, with its traceback as exc_info)
TOOLS_LOGGER = "codemode.pipeline.tools"
_tools_log = logging.getLogger(TOOLS_LOGGER)


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

    What the body raised itself (not a typed ``HarnessError``, which says what happened in
    its message) keeps its traceback for the developer: in ``error.traceback`` (the log's
    result event, never the content) and in an INFO record on the ``codemode.pipeline.tools``
    logger (``TOOLS_LOGGER``) with the exception as ``exc_info`` and the tool's name as
    ``record.tool``.
    """
    if isinstance(thrown, (Exception, asyncio.CancelledError)) or error_info(thrown) is not None:
        failure = failure_from(thrown)
    else:
        failure = failure_from(
            ToolExitError(f'tool "{tool_name}" raised {describe_thrown(thrown)}'))
    if error_info(thrown) is not None or failure.error is None:
        return failure
    trace = traceback_of(thrown)
    if trace is None:
        return failure
    try:
        _tools_log.info("tool %r raised %s", tool_name, describe_thrown(thrown),
                        exc_info=thrown, extra={"tool": tool_name})
    except Exception:                  # a handler that fails: the call's outcome stands
        pass
    return msgspec.structs.replace(
        failure, error=msgspec.structs.replace(failure.error, traceback=trace))


def shown_traceback(failure: CallResult) -> CallResult:
    """``failure`` with its ``error.traceback`` (if any) appended to its message and content,
    for a tool declared ``show_traceback=True``; as it is otherwise."""
    error = failure.error
    if error is None or error.traceback is None:
        return failure
    message = f"{error.message}\n{error.traceback.rstrip()}"
    return msgspec.structs.replace(
        failure, content=(text_block(f"Error: {message}"),),
        error=msgspec.structs.replace(error, message=message))


def traceback_of(thrown: BaseException) -> str | None:
    """``thrown``'s formatted traceback (chained causes included), or ``None`` when it has
    none or it cannot be formatted; never raises."""
    if getattr(thrown, "__traceback__", None) is None:
        return None
    try:
        text = "".join(_traceback.format_exception(thrown))
        if not text.isascii():         # a lone surrogate would break the log's encoding
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        return text
    except Exception:
        return None


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
