"""``ToolDefinition`` and the ``@tool`` decorator (docs/pipeline-spec.md §1.6, §5)."""

from __future__ import annotations

import asyncio
import inspect
import re
import typing
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from ._convert import check_return, to_json
from ._deadline import thread_started
from ._errors import InvalidArgumentsError
from ._execution import Execution, RunContext
from ._lossless import snapshot
from ._schema import check_schema, validate

__all__ = ["ToolDefinition", "tool"]

Blocks = Any  # a list of content blocks


class ToolDefinition(msgspec.Struct, frozen=True, kw_only=True):
    """A tool. Only ``name``, ``description`` and ``parameters`` reach the model.

    Args:
        name: unique per scope; non-empty.
        description: model-facing description.
        parameters: JSON Schema of the arguments object. The registry checks every call's
            arguments against it before policy runs (``INVALID_ARGS``).
        execute: ``(args, ctx: RunContext) -> value`` (async or sync); the value must be
            lossless JSON matching ``output_schema``.
        output_schema: JSON Schema of the value; ``None`` accepts any JSON value.
        render: ``(args, value) -> blocks`` (or a string); default: strings raw, other values
            pretty JSON.
        presentation_meta: ``(args, value) -> JSON``; computed for top-level calls only.
        finalize_content: ``(execution, result) -> blocks | None``; synchronous; runs exactly
            once at the end of every call of this tool, whatever the outcome.
        timeout_ms: budget in milliseconds, enforced around the body by the pipeline
            (``_deadline``, docs/pipeline.md "Timeouts"): ``TOOL_TIMEOUT`` when the body
            stopped at the deadline, ``TOOL_OUTCOME_UNKNOWN`` when it could not be stopped
            (a sync body in its worker thread). ``None``: no budget.
        is_concurrency_safe: ``(args) -> bool``; a call runs in the parallel pool only when
            this returns exactly ``True``.
        present_call: pure ``(args) -> JSON | None`` for the pending UI card.
        present_result: pure ``(args, {"content", "isError", "meta"}) -> JSON | None``.
        arguments_fit: an optional fast ``(args) -> bool`` that is true only for arguments the
            ``parameters`` schema accepts (``@tool`` sets msgspec's compiled check): the
            registry's argument check runs the JSON Schema validator only when it is false.
        output_fits: the same for the value and ``output_schema`` (``@tool`` sets msgspec's
            check of the return annotation): the value is validated against the schema only
            when it is false.
        convert_output: ``(value) -> JSON value`` for a value that is not lossless JSON as
            the body returned it (a dataclass, Struct, enum or datetime, at any depth): the
            registry calls it only then, before the value is validated, so a JSON value
            never pays for it (``@tool`` sets msgspec's conversion, ``_convert.to_json``).
            What it raises makes the call fail ``INVALID_TOOL_OUTPUT``. ``None``: a value
            that is not lossless JSON fails as it is.
        resumable: the body may suspend (log ``tool/suspended`` and return a pending value)
            and knows how to go on when ``Session.resume`` calls it again with
            ``ctx.resumption`` set (Code Mode's ``run_code``). Only such tools are resumed.
        show_traceback: a failure of the body shows its traceback to whoever reads the
            result (the model, a program): appended to ``error.message`` and the content.
            Default ``False``: the traceback is only in the log's result event and the
            ``codemode.pipeline.tools`` logger (docs/pipeline.md "Tracebacks").
        labels: what this tool's results carry (``"private"``, ``"untrusted"``): a Code-Mode
            run that receives one of its results holds these labels, and policy rules can
            decide later calls on them (docs/codemode.md "Labels"). Empty: none.
        group: the toolset the tool comes from, for listings that group tools (an MCP
            server's name, set by the MCP client). Empty: none given.
        read_only: the tool only reads: a call changes nothing (from ``@tool(read_only=
            True)``, an MCP tool's ``readOnlyHint``). Default ``False``: a tool that says
            nothing counts as changing something. A Code-Mode dry run runs read-only tools
            and simulates the others (docs/codemode.md "Plan before the run").
        simulate: ``(args) -> value``, the value a dry run gives the program instead of
            running the tool (a tool with effects only). ``None``: a value built from
            ``output_schema``, else a marker.
        destructive: a call of this tool (one that is not read-only) may destroy or
            overwrite something (True), or only adds (False); from ``@tool(destructive=
            ...)``, an MCP tool's ``destructiveHint``. ``None``: not said (MCP's default
            reading is True). A dry run's plan shows it per entry.
        idempotent: calling the tool again with the same arguments has no further effect
            (True) or may have (False); from ``@tool(idempotent=...)``, an MCP tool's
            ``idempotentHint``. ``None``: not said (MCP's default reading is False).

    Raises:
        ValueError: a bad name or timeout, or ``parameters``/``output_schema`` is not a JSON
            Schema the validator (``jsonschema``) can read.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    execute: Callable[..., Any]
    output_schema: dict[str, Any] | None = None
    render: Callable[[Any, Any], Blocks] | None = None
    presentation_meta: Callable[[Any, Any], Any] | None = None
    finalize_content: Callable[[Execution, Any], Blocks | None] | None = None
    timeout_ms: int | None = None
    is_concurrency_safe: Callable[[Any], Any] | None = None
    present_call: Callable[[Any], Any] | None = None
    present_result: Callable[[Any, Any], Any] | None = None
    resumable: bool = False
    show_traceback: bool = False
    labels: frozenset[str] = frozenset()
    group: str = ""
    arguments_fit: Callable[[Any], bool] | None = None
    output_fits: Callable[[Any], bool] | None = None
    convert_output: Callable[[Any], Any] | None = None
    read_only: bool = False
    simulate: Callable[[Any], Any] | None = None
    destructive: bool | None = None
    idempotent: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a tool name must be a non-empty string")
        if isinstance(self.labels, str) or not all(
                isinstance(label, str) and label for label in self.labels):
            raise TypeError(f"tool {self.name!r}: labels must be a set of non-empty strings")
        if not isinstance(self.labels, frozenset):
            object.__setattr__(self, "labels", frozenset(self.labels))
        if not isinstance(self.description, str):
            raise TypeError(f"tool {self.name!r}: description must be a string")
        if not isinstance(self.parameters, dict):
            raise TypeError(f"tool {self.name!r}: parameters must be a JSON Schema object")
        if not callable(self.execute):
            raise TypeError(f"tool {self.name!r}: execute must be callable")
        if self.simulate is not None and not callable(self.simulate):
            raise TypeError(f"tool {self.name!r}: simulate must be callable")
        if self.convert_output is not None and not callable(self.convert_output):
            raise TypeError(f"tool {self.name!r}: convert_output must be callable")
        if self.timeout_ms is not None and (
            not isinstance(self.timeout_ms, (int, float)) or self.timeout_ms <= 0
        ):
            raise ValueError(f"tool {self.name!r}: timeout_ms must be a positive number")
        # A schema the validator cannot read fails here, at registration, not at call time.
        check_schema(self.parameters, f"tool {self.name!r}: parameters")
        if self.output_schema is not None:
            check_schema(self.output_schema, f"tool {self.name!r}: output_schema")

    def model_schema(self) -> dict[str, Any]:
        """``{"name", "description", "parameters"}``: all the model ever sees."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


# --------------------------------------------------------------------------------------
# @tool
# --------------------------------------------------------------------------------------

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$")
_ENTRY = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description without the sections, {param: description}) of a Google-style doc."""
    if not doc:
        return "", {}
    body: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    entry_indent: int | None = None
    for line in inspect.cleandoc(doc).splitlines():
        header = _SECTION.match(line) if not line[:1].isspace() else None
        if header:
            section, current, entry_indent = header.group(1), None, None
            continue
        if section is None:
            body.append(line)
            continue
        if section not in ("Args", "Arguments", "Parameters") or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        entry = _ENTRY.match(line)
        if entry and (entry_indent is None or indent <= entry_indent):
            entry_indent = indent
            current = entry.group(1).lstrip("*")
            params[current] = entry.group(2).strip()
        elif current is not None:
            params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(body).strip(), params


def _inline_schema(kind: Any) -> dict[str, Any]:
    """msgspec's JSON Schema for ``kind`` with the root ``$ref`` inlined; other ``$defs``
    are kept at the root (refs ``#/$defs/X`` still resolve)."""
    schema = msgspec.json.schema(kind)
    defs = dict(schema.pop("$defs", {}))
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and len(schema) == 1:
        name = ref[len("#/$defs/"):]
        if not any(_ref_uses(defn, name) for defn in defs.values()):  # itself included
            schema = dict(defs.pop(name))
        else:
            schema = dict(defs[name])
    if defs:
        schema["$defs"] = defs
    return schema


def _ref_uses(schema: Any, name: str) -> bool:
    target = f"#/$defs/{name}"
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("$ref") == target:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _translate(error: msgspec.ValidationError) -> str:
    text = str(error)
    match = re.match(r"^(.*) - at `\$\.?(.*)`$", text)
    if match:
        detail, where = match.groups()
        detail = detail.replace("`", "")
        return f'"{where}": {detail[0].lower() + detail[1:]}' if where else detail
    return text.replace("`", "")


_PLAIN = (int, float, str, bool, type(None), list, dict)  # values a body returns as they are


@typing.overload
def tool(fn: Callable[..., Any], /) -> ToolDefinition: ...


@typing.overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
    timeout_ms: int | None = None,
    concurrency_safe: bool | Callable[[Any], Any] = False,
    blocking: bool = True,
    render: Callable[[Any, Any], Any] | None = None,
    presentation_meta: Callable[[Any, Any], Any] | None = None,
    finalize_content: Callable[[Execution, Any], Any] | None = None,
    present_call: Callable[[Any], Any] | None = None,
    present_result: Callable[[Any, Any], Any] | None = None,
    show_traceback: bool = False,
    labels: Iterable[str] = (),
    read_only: bool = False,
    simulate: Callable[[Any], Any] | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
) -> Callable[[Callable[..., Any]], ToolDefinition]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
    timeout_ms: int | None = None,
    concurrency_safe: bool | Callable[[Any], Any] = False,
    blocking: bool = True,
    render: Callable[[Any, Any], Any] | None = None,
    presentation_meta: Callable[[Any, Any], Any] | None = None,
    finalize_content: Callable[[Execution, Any], Any] | None = None,
    present_call: Callable[[Any], Any] | None = None,
    present_result: Callable[[Any, Any], Any] | None = None,
    show_traceback: bool = False,
    labels: Iterable[str] = (),
    read_only: bool = False,
    simulate: Callable[[Any], Any] | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
) -> Any:
    """Build a ``ToolDefinition`` from a typed function (sync or async).

    - ``parameters``: JSON Schema derived with msgspec from the parameters' type hints
      (a parameter annotated ``RunContext`` receives the context instead); the root object is
      open (unknown keys pass) unless ``strict=True``.
    - ``output_schema``: from the return annotation (none or ``Any``: any JSON).
    - ``description``: the docstring without its ``Args:``/``Returns:`` sections; each
      ``Args:`` entry becomes that property's ``description``.
    - The body validates the arguments first: violations raise ``InvalidArgumentsError``
      (``INVALID_ARGS``) with ``"invalid arguments: " + "; ".join(violations)``. Sync
      functions run in ``asyncio.to_thread``, unless declared ``blocking=False``: a sync
      function that never blocks (pure computation of a few microseconds: no I/O, no
      sleeping, no locks) runs on the event loop itself, sparing two thread hand-offs per
      call (~100-300 us). The declaration is the author's promise: a body that blocks
      anyway stalls every other call of the session while it runs. Ignored for async
      functions.
    - The returned value is converted to JSON as msgspec encodes it, at any depth
      (``list[Issue]`` of dataclasses or Structs, enums, datetimes: ``_convert``), when it
      is not JSON as returned; a return annotation msgspec cannot encode (a plain class,
      ``object``, an iterator) raises ``TypeError`` here, naming the tool and the type,
      not when the tool is called.
    - ``present_call``/``present_result`` are called only for arguments that validate and
      return ``None`` (generic card) on any problem: they never raise.
    - ``labels``: what the tool's results carry (``ToolDefinition.labels``).
    - ``read_only``/``simulate``: the tool only reads; the value a dry run gives instead
      of running a tool with effects (``ToolDefinition.read_only``, ``.simulate``).
    - ``destructive``/``idempotent``: what a call with effects does (``ToolDefinition.
      destructive``, ``.idempotent``; None: not said).
    - ``show_traceback``: the body's traceback shown with its failure
      (``ToolDefinition.show_traceback``); by default only the log and ``logging`` keep it.

    Usable as ``@tool`` or ``@tool(name=..., ...)``.
    """

    def build(func: Callable[..., Any]) -> ToolDefinition:
        return _build_tool(
            func,
            name=name,
            description=description,
            strict=strict,
            timeout_ms=timeout_ms,
            concurrency_safe=concurrency_safe,
            blocking=blocking,
            render=render,
            presentation_meta=presentation_meta,
            finalize_content=finalize_content,
            present_call=present_call,
            present_result=present_result,
            show_traceback=show_traceback,
            labels=frozenset(labels),
            read_only=read_only,
            simulate=simulate,
            destructive=destructive,
            idempotent=idempotent,
        )

    return build(fn) if fn is not None else build


def _build_tool(
    func: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    strict: bool,
    timeout_ms: int | None,
    concurrency_safe: bool | Callable[[Any], Any],
    blocking: bool,
    render: Callable[[Any, Any], Any] | None,
    presentation_meta: Callable[[Any, Any], Any] | None,
    finalize_content: Callable[[Execution, Any], Any] | None,
    present_call: Callable[[Any], Any] | None,
    present_result: Callable[[Any, Any], Any] | None,
    show_traceback: bool = False,
    labels: frozenset[str] = frozenset(),
    read_only: bool = False,
    simulate: Callable[[Any], Any] | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
) -> ToolDefinition:
    tool_name = name or func.__name__
    hints = typing.get_type_hints(func, include_extras=True)
    signature = inspect.signature(func)
    fields: list[Any] = []
    ctx_param: str | None = None
    positional_only: list[str] = []
    order: list[str] = []
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"@tool {tool_name}: *args/**kwargs are not supported")
        kind = hints.get(param.name, Any)
        if kind is RunContext:
            ctx_param = param.name
            continue
        order.append(param.name)
        if param.kind is param.POSITIONAL_ONLY:
            positional_only.append(param.name)
        if param.default is inspect.Parameter.empty:
            fields.append((param.name, kind))
        else:
            fields.append((param.name, kind, param.default))
    args_type = msgspec.defstruct(
        f"{tool_name}_arguments", fields, kw_only=True, forbid_unknown_fields=strict
    )
    parameters = _inline_schema(args_type)
    parameters.pop("title", None)
    summary, param_docs = _parse_docstring(func.__doc__)
    for pname, pdoc in param_docs.items():
        prop = parameters.get("properties", {}).get(pname)
        if isinstance(prop, dict) and pdoc and "description" not in prop:
            prop["description"] = pdoc
    if strict:
        parameters["additionalProperties"] = False
    ret = hints.get("return", Any)
    check_return(tool_name, ret)
    try:
        output_schema = (None if ret is Any else
                         _inline_schema(None if ret is type(None) else ret))
    except TypeError as exc:       # msgspec's, for an annotation check_return let through
        raise TypeError(f"@tool {tool_name}: no JSON Schema for the return annotation: "
                        f"{str(exc).strip().splitlines()[-1]}") from None
    is_async = inspect.iscoroutinefunction(func)
    inline = blocking is False

    async def execute(args: Any, ctx: RunContext) -> Any:
        try:
            converted = msgspec.convert(args, args_type)   # fast path: msgspec's C validator
        except msgspec.ValidationError as exc:
            # Report every violation, path-qualified (docs/pipeline-spec.md §5), not just the first.
            problems = validate(parameters, args, label="arguments")
            detail = "; ".join(problems) if problems else _translate(exc)
            raise InvalidArgumentsError(f"invalid arguments: {detail}") from None
        positional = [getattr(converted, p) for p in positional_only]
        keywords = {p: getattr(converted, p) for p in order if p not in positional_only}
        if ctx_param is not None:
            keywords[ctx_param] = ctx
        if is_async:
            value = await func(*positional, **keywords)
        elif inline:
            value = func(*positional, **keywords)
        else:
            value = await _in_thread(func, *positional, **keywords)
        if type(value) not in _PLAIN:   # a Struct, a dataclass, ...: surely not JSON as it is
            try:                        # (JSON containers holding one: the registry converts)
                value = to_json(value)
            except Exception:
                pass                    # the registry's conversion fails it, with the reason
        return value

    def fits(args: Any) -> bool:
        try:
            msgspec.convert(args, args_type)
            return True
        except Exception:
            return False

    def output_fits(value: Any) -> bool:
        try:
            msgspec.convert(value, ret)
            return True
        except Exception:
            return False

    def soft(fn: Callable[..., Any] | None) -> Callable[..., Any] | None:
        if fn is None:
            return None

        def presenter(args: Any, *rest: Any) -> Any:
            try:
                if not fits(args):
                    return None
                return snapshot(fn(args, *rest), what="presentation")
            except BaseException:
                return None

        return presenter

    if callable(concurrency_safe):
        classifier: Callable[[Any], Any] | None = concurrency_safe
    elif concurrency_safe is True:
        def classifier(args: Any) -> bool:
            return fits(args)
    else:
        classifier = None

    execute.__name__ = f"{tool_name}_execute"
    execute.__qualname__ = execute.__name__
    return ToolDefinition(
        name=tool_name,
        description=description if description is not None else summary,
        parameters=parameters,
        execute=execute,
        output_schema=output_schema,
        render=render,
        presentation_meta=presentation_meta,
        finalize_content=finalize_content,
        timeout_ms=timeout_ms,
        is_concurrency_safe=classifier,
        present_call=soft(present_call),
        present_result=soft(present_result),
        show_traceback=show_traceback,
        labels=labels,
        read_only=read_only,
        simulate=simulate,
        destructive=destructive,
        idempotent=idempotent,
        arguments_fit=fits,
        output_fits=None if output_schema is None else output_fits,
        convert_output=to_json,
    )


async def _in_thread(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``asyncio.to_thread`` that re-raises whatever ``func`` raised in this coroutine's own
    frame: a ``GeneratorExit`` travelling through a future's ``await`` escapes every
    ``except`` above it (CPython), so the thread hands back the exception as a value."""

    ended = thread_started()    # watched by the call's deadline, if it has one

    def run() -> tuple[bool, Any]:
        try:
            return True, func(*args, **kwargs)
        except BaseException as exc:  # SystemExit from argparse included
            return False, exc
        finally:
            if ended is not None:
                ended.set()

    ok, outcome = await asyncio.to_thread(run)
    if not ok:
        raise outcome
    return outcome
