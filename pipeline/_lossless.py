"""Lossless-JSON snapshots (docs/pipeline-spec.md §1.1).

A value is lossless JSON when a JSON round trip returns it unchanged. Accepted (exact types
only, no subclasses): ``None``, ``bool``, ``str`` (without unpaired surrogates), ``int``
within the signed 64-bit range ``[-2**63, 2**63)``, finite ``float`` other than ``-0.0``,
``list`` and ``dict`` with ``str`` keys, plus the frozen containers made here
(``FrozenList``, ``FrozenDict``). Rejected: NaN/±inf, ``-0.0``, ints outside the 64-bit range
(big integers: many JSON readers turn them into lossy floats, so they are refused rather than
silently rounded), tuples, sets, bytes, cycles (a container that contains itself, at any
depth), any other object.

``snapshot`` reads every container exactly once, works iteratively (no recursion limit) and
returns a detached, deep-frozen copy; shared non-cyclic references are copied per use.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

from ._errors import NotLosslessError

__all__ = ["INT_MAX", "INT_MIN", "FrozenDict", "FrozenList", "snapshot", "thaw"]

INT_MIN = -(2**63)
INT_MAX = 2**63 - 1


def _readonly(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is immutable")


class FrozenDict(dict):  # type: ignore[type-arg]
    """A ``dict`` whose mutators raise ``TypeError``. Compares and encodes like a dict."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly
    __ior__ = _readonly

    def __hash__(self) -> int:  # type: ignore[override]
        raise TypeError("unhashable type: 'FrozenDict'")

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: Any) -> FrozenDict:
        return self

    def __reduce__(self) -> Any:
        return (FrozenDict, (dict(self),))


class FrozenList(list):  # type: ignore[type-arg]
    """A ``list`` whose mutators raise ``TypeError``. Compares and encodes like a list."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = _readonly
    sort = reverse = __iadd__ = __imul__ = _readonly

    def __hash__(self) -> int:  # type: ignore[override]
        raise TypeError("unhashable type: 'FrozenList'")

    def __repr__(self) -> str:
        return f"FrozenList({list.__repr__(self)})"

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: Any) -> FrozenList:
        return self

    def __reduce__(self) -> Any:
        return (FrozenList, (list(self),))


_SCALARS = (str, bool, type(None))


def _describe(value: Any) -> str:
    try:
        return type(value).__name__
    except Exception:  # pragma: no cover - type() never fails in practice
        return "object"


def _path(parts: list[Any]) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _encodable(text: str) -> bool:
    """``True`` unless ``text`` holds an unpaired surrogate (JSON/UTF-8 cannot carry it)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _scalar_problem(value: Any) -> str | None:
    """None if ``value`` is an acceptable scalar, else why not. Containers return ''."""
    kind = type(value)
    if kind is str:
        return None if _encodable(value) else "string with an unpaired surrogate"
    if kind in _SCALARS:
        return None
    if kind is int:
        if INT_MIN <= value <= INT_MAX:
            return None
        return "integer outside the 64-bit range [-2**63, 2**63)"
    if kind is float:
        if not math.isfinite(value):
            return "non-finite number"
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return "negative zero"
        return None
    if kind in (dict, list, FrozenDict, FrozenList):
        return ""
    return f"unsupported type {_describe(value)}"


_FAST_DEPTH = 16


def _flat_copy(container: Any, depth: int = 0) -> Any:
    """The frozen copy of a list or dict of acceptable scalars and such containers nested at
    most `_FAST_DEPTH` levels (most arguments and tool values: no frames, no path kept), or
    None for anything else (deeper, a cycle, or a problem to report): `snapshot`'s general
    walk then handles it, and names the problem."""
    if depth > _FAST_DEPTH:
        return None
    try:
        if type(container) in (dict, FrozenDict):
            out: dict[str, Any] = {}
            for key, child in dict.items(container):
                if type(key) is not str or not (key.isascii() or _encodable(key)):
                    return None
                kind = type(child)     # the commonest scalars checked here, the rest below
                if (kind is int and INT_MIN <= child <= INT_MAX) or kind is bool \
                        or child is None or (kind is str and child.isascii()):
                    out[key] = child
                    continue
                child = _flat_child(child, depth)
                if child is _REFUSED:
                    return None
                out[key] = child
            return FrozenDict(out)
        items = []
        for child in list.__iter__(container):
            child = _flat_child(child, depth)
            if child is _REFUSED:
                return None
            items.append(child)
        return FrozenList(items)
    except Exception:                   # mutated while read: the walk reports it
        return None


_REFUSED = object()


def _flat_child(child: Any, depth: int) -> Any:
    """`child` of a container at `depth` as `_flat_copy` keeps it: itself (a scalar), its
    frozen copy (a container), or `_REFUSED` (a problem, or too deep for the fast path)."""
    problem = _scalar_problem(child)
    if problem == "":
        copied = _flat_copy(child, depth + 1)
        return _REFUSED if copied is None else copied
    return child if problem is None else _REFUSED


def snapshot(value: Any, *, what: str = "value") -> Any:
    """Return a detached deep-frozen copy of ``value`` if it is lossless JSON.

    Args:
        value: anything; containers are read once each.
        what: names the value in the error message (e.g. "arguments", "tool result").
    Returns:
        the same scalar, or ``FrozenList`` / ``FrozenDict`` copies for containers.
    Raises:
        NotLosslessError: "<what> must be losslessly JSON-serializable: <reason> at <$.path>".
    """
    problem = _scalar_problem(value)
    if problem is None:
        return value
    if problem == "":
        flat = _flat_copy(value)
        if flat is not None:
            return flat
    path: list[Any] = []

    def fail(reason: str) -> NoReturn:
        raise NotLosslessError(
            f"{what} must be losslessly JSON-serializable: {reason} at {_path(path)}"
        )

    if problem:
        fail(problem)

    # Each frame: [source id, iterator over (key, child), output list/dict, is_dict]
    on_path: set[int] = set()
    root_out: Any = None

    def open_frame(container: Any) -> list[Any]:
        if id(container) in on_path:
            fail("cycle")
        on_path.add(id(container))
        if type(container) in (dict, FrozenDict):
            try:
                items = list(dict.items(container))
            except Exception as exc:  # a mutated-while-read dict, etc.
                fail(f"unreadable mapping ({type(exc).__name__})")
            return [container, iter(items), {}, True]
        items = list(enumerate(list.__iter__(container)))
        return [container, iter(items), [], False]

    stack = [open_frame(value)]
    while stack:
        frame = stack[-1]
        source, iterator, out, is_dict = frame[:4]
        advanced = False
        for key, child in iterator:
            if is_dict and type(key) is not str:
                path.append(repr(key) if not isinstance(key, str) else key)
                fail(f"non-string key of type {_describe(key)}")
            if is_dict and not _encodable(key):
                path.append(key.encode("utf-8", "backslashreplace").decode())
                fail("key with an unpaired surrogate")
            path.append(key)
            problem = _scalar_problem(child)
            if problem is None:
                if is_dict:
                    out[key] = child
                else:
                    out.append(child)
                path.pop()
                continue
            if problem:
                fail(problem)
            child_frame = open_frame(child)
            child_frame.append((out, key if is_dict else None))
            stack.append(child_frame)
            advanced = True
            break
        if advanced:
            continue
        stack.pop()
        on_path.discard(id(source))
        frozen: Any = FrozenDict(out) if is_dict else FrozenList(out)
        if stack:
            parent_out, parent_key = frame[4]
            if isinstance(parent_out, dict):
                parent_out[parent_key] = frozen
            else:
                parent_out.append(frozen)
            path.pop()
        else:
            root_out = frozen
    return root_out


def thaw(value: Any) -> Any:
    """Return a plain mutable ``dict``/``list`` deep copy of a (frozen) JSON value."""
    if type(value) not in (dict, list, FrozenDict, FrozenList):
        return value
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        src, dst = stack.pop()
        items = src.items() if isinstance(src, dict) else enumerate(src)
        for key, child in items:
            if type(child) in (dict, list, FrozenDict, FrozenList):
                copy: Any = {} if isinstance(child, dict) else []
                stack.append((child, copy))
            else:
                copy = child
            if isinstance(dst, dict):
                dst[key] = copy
            else:
                dst.append(copy)
    return root
