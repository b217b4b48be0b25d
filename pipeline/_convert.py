"""A typed tool's value as JSON, converted the way msgspec encodes it, and the check, made
when the tool is defined, that its return annotation can be converted at all.

``@tool`` declares a tool's output schema from its return annotation with msgspec
(``msgspec.json.schema``); the value it returns is converted by the same rules, at any
depth (``msgspec.to_builtins``): a dataclass, msgspec ``Struct``, attrs class or
``TypedDict`` becomes an object, a ``NamedTuple``, tuple, set or frozenset a list, an enum
its value, a ``datetime``/``date``/``time`` its ISO 8601 string, a ``UUID`` or ``Decimal``
its string, ``bytes`` base64 text, a mapping's keys strings. Conversion only reshapes: the
converted value is then held to the lossless-JSON rules like any other (docs/pipeline-spec.md
§1.1): NaN, the infinities, ``-0.0`` and integers outside 64 bits are still refused.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import msgspec.inspect

__all__ = ["check_return", "to_json"]


def to_json(value: Any) -> Any:
    """``value`` with every part that is not a JSON value converted as msgspec encodes it
    (see the module docstring); JSON values are kept as they are (in new containers).

    Raises:
        TypeError: a part msgspec cannot encode (an object of a plain class).
        RecursionError, ValueError: a value too deep, or a cycle.
    """
    built = msgspec.to_builtins(value, str_keys=True)
    # to_builtins keeps tuples (a builtin type), which JSON has not: made lists here. Every
    # list and dict to_builtins returns is its own new one, so they are changed in place.
    if type(built) is tuple:
        built = list(built)
    if type(built) not in (list, dict):
        return built
    stack: list[Any] = [built]
    while stack:
        node = stack.pop()
        items = node.items() if type(node) is dict else enumerate(node)
        for key, child in items:
            kind = type(child)
            if kind is tuple:
                child = node[key] = list(child)
                stack.append(child)
            elif kind is list or kind is dict:
                stack.append(child)
    return built


def check_return(tool_name: str, annotation: Any) -> None:
    """Refuse a return annotation whose values cannot be converted to JSON.

    Raises:
        TypeError: ``"@tool <name>: the return annotation <annotation> cannot be converted
            to JSON: type <T> is not supported (...)"``, naming the first type msgspec has
            no encoding for (a plain class, ``object``, a callable, an iterator, ...), at
            any depth.
    """
    try:
        info = msgspec.inspect.type_info(annotation)
    except Exception as exc:
        raise _refused(tool_name, annotation, str(exc).strip().splitlines()[-1]) from None
    seen: set[int] = set()
    stack: list[Any] = [info]
    while stack:
        node = stack.pop()
        if id(node) in seen:                     # a recursive type refers to itself
            continue
        seen.add(id(node))
        if isinstance(node, msgspec.inspect.CustomType):
            raise _refused(tool_name, annotation,
                           f"type {_name(node.cls)} is not supported")
        if isinstance(node, (list, tuple)):
            stack.extend(node)
        elif isinstance(node, (msgspec.inspect.Type, msgspec.inspect.Field)):
            stack.extend(getattr(node, field) for field in node.__struct_fields__)


def _refused(tool_name: str, annotation: Any, why: str) -> TypeError:
    return TypeError(
        f"@tool {tool_name}: the return annotation {_name(annotation)} cannot be converted "
        f"to JSON: {why} (return JSON values, dataclasses, msgspec Structs, attrs classes, "
        f"TypedDicts, enums or datetimes, or annotate Any)")


def _name(kind: Any) -> str:
    """``Issue`` for a class, ``list[Issue]`` for a generic alias (modules left out)."""
    if isinstance(kind, type) and not hasattr(kind, "__origin__"):
        return kind.__qualname__
    return re.sub(r"\b[\w.]+\.(?=\w)", "", repr(kind))
