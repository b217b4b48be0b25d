"""A call's results in frozen form (docs/pipeline-spec.md S9, S10, S12): a tool's value made
into a successful result, a failure from a wrapper rebuilt, any result materialized, and the
fingerprint that shows whether a listener wrote through a frozen result.

Pure functions of a result (and, for a success, of the tool and the execution): the
dispatch and commit phases of a pending call both make and check results this way.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ._content import default_content, freeze_blocks, freeze_contexts
from ._definition import ToolDefinition
from ._errors import InvalidToolOutputError, NotLosslessError
from ._execution import Execution
from ._lossless import snapshot
from ._normalize import message_of
from ._result import CallResult, ToolErrorDetail, text_block
from ._schema import validate
from .events import ErrorInfo

__all__ = ["MATERIALIZATION_MESSAGE", "fingerprint", "materialize", "rebuild_failure",
           "restored", "success"]

MATERIALIZATION_MESSAGE = "tool result must be losslessly JSON-serializable"


def success(defn: ToolDefinition, execution: Execution, value: Any, *,
            concludes: bool) -> CallResult:
    """Snapshot, validate, render, compute meta. Raises ``InvalidToolOutputError``."""
    name = execution.name

    def invalid(problem: str) -> InvalidToolOutputError:
        return InvalidToolOutputError(f'tool "{name}" returned invalid output: {problem}')

    try:
        frozen = snapshot(value, what="value")
    except NotLosslessError as exc:
        convert = defn.convert_output
        if convert is None:
            raise invalid(exc.message) from None
        frozen = _converted(convert, value, invalid)
    except Exception as exc:
        raise invalid(f"value could not be read ({message_of(exc)})") from None
    schema, fits = defn.output_schema, defn.output_fits
    if schema is not None and (fits is None or not fits(frozen)):
        problems = validate(schema, frozen, label="value")
        if problems:
            raise invalid("; ".join(problems))
    args = execution.arguments

    def frozen_hook(hook: Any, label: str, freeze: Any, what: str) -> Any:
        """`hook(args, frozen)` (the tool's render or presentation meta), frozen."""
        try:
            made = hook(args, frozen)
        except Exception as exc:
            raise invalid(f"{label} raised: {message_of(exc)}") from None
        try:
            return freeze(made, what=what)
        except NotLosslessError as exc:
            raise invalid(exc.message) from None

    content = (default_content(frozen) if defn.render is None else
               frozen_hook(defn.render, "render", freeze_blocks, "rendered content"))
    meta = None
    if execution.parent is None and defn.presentation_meta is not None:
        meta = frozen_hook(defn.presentation_meta, "presentation meta", snapshot,
                           "presentation meta")
    return CallResult(
        is_error=False, value=frozen, content=content, meta=meta, concludes_turn=concludes
    )


def _converted(convert: Any, value: Any, invalid: Any) -> Any:
    """The frozen snapshot of ``convert(value)`` (the tool's ``convert_output``), for a
    value that is not lossless JSON as returned. Raises ``invalid(problem)``."""
    try:
        converted = convert(value)
    except RecursionError:
        raise invalid("value could not be converted to JSON: nested too deeply") from None
    except Exception as exc:
        raise invalid(f"value could not be converted to JSON: {message_of(exc)}") from None
    try:
        return snapshot(converted, what="value")
    except NotLosslessError as exc:
        raise invalid(exc.message) from None
    except Exception as exc:
        raise invalid(f"value could not be read ({message_of(exc)})") from None


def rebuild_failure(result: CallResult, contexts: tuple[Any, ...]) -> CallResult:
    """S10: a failed result a wrapper made, rebuilt from its readable parts."""
    error = result.error
    message = (
        error.message
        if isinstance(error, ToolErrorDetail) and isinstance(error.message, str)
        else "tool call failed"
    )
    info = (
        error.info
        if isinstance(error, ToolErrorDetail) and isinstance(error.info, ErrorInfo)
        else None
    )
    content = (
        freeze_blocks(result.content) if result.content else (text_block(f"Error: {message}"),)
    )
    meta = snapshot(result.meta, what="meta") if result.meta is not None else None
    return CallResult(
        is_error=True,
        content=content,
        error=ToolErrorDetail(message=message, info=info, traceback=_trace(error)),
        meta=meta,
        additional_contexts=contexts,
        denied=result.denied is True,
    )


def fingerprint(result: CallResult) -> bytes:
    """What a listener could change by writing through a frozen container (value, content,
    meta, contexts), as canonical JSON; a result that no longer encodes gets ``b""``."""
    try:
        return msgspec.json.encode(
            (None if result.is_error else result.value, result.content, result.meta,
             result.additional_contexts))
    except Exception:
        return b""


def restored(result: CallResult, taken: bytes) -> CallResult:
    """``result`` with the fields of its fingerprint ``taken`` decoded and frozen again."""
    value, content, meta, contexts = msgspec.json.decode(taken)
    return msgspec.structs.replace(
        result,
        value=msgspec.UNSET if result.is_error else snapshot(value, what="value"),
        content=freeze_blocks(content),
        meta=snapshot(meta, what="meta") if meta is not None else None,
        additional_contexts=freeze_contexts(contexts),
    )


def materialize(result: Any) -> CallResult:
    """Snapshot every presentation field; enforce the success/failure shape."""
    if not isinstance(result, CallResult):
        raise TypeError("not a CallResult")
    content = freeze_blocks(result.content, what="content")
    meta = snapshot(result.meta, what="meta") if result.meta is not None else None
    contexts = freeze_contexts(result.additional_contexts)
    if result.is_error:
        error = result.error
        if not isinstance(error, ToolErrorDetail) or not isinstance(error.message, str):
            raise TypeError("a failed result needs an error message")
        info = error.info
        if info is not None and not (
            isinstance(info, ErrorInfo)
            and isinstance(info.name, str)
            and isinstance(info.code, str)
        ):
            raise TypeError("error info must be {name, code} strings")
        return CallResult(
            is_error=True,
            content=content,
            error=ToolErrorDetail(message=str(error.message), info=info,
                                  traceback=_trace(error)),
            meta=meta,
            additional_contexts=contexts,
            denied=result.denied is True,
        )
    value = snapshot(result.value, what="value")
    return CallResult(
        is_error=False, content=content, value=value, meta=meta,
        additional_contexts=contexts, concludes_turn=bool(result.concludes_turn is True),
    )


def _trace(error: Any) -> str | None:
    """The developer's traceback a failure carries (a string), else ``None``."""
    trace = getattr(error, "traceback", None) if isinstance(error, ToolErrorDetail) else None
    return trace if isinstance(trace, str) else None
