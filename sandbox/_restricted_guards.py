"""The restricted tier's guards and the builtins a program sees, built per run.

RestrictedPython's rewrite turns attribute reads and writes, item access, iteration,
unpacking, in-place operators and `print` into calls of `_getattr_`, `_write_`,
`_inplacevar_`, `_print_` and the like, and this tier's policy adds `_tick_`, `_add_`,
`_mul_`, `_pow_`, `_lshift_`; `_program_builtins` supplies them all for one run, with the
plain builtins beside them. The guards follow the attribute-name rule, hand out modules as
their views, let writes reach only the program's own objects and plain containers (else a
`_ReadOnly` stand-in; a container held by a library class is a per-run copy), refuse
interpreter-wide state (`STATEFUL_ATTRS` on what the program does not own), refuse
operations that would obviously allocate past the memory limit or multiply integers past
`MAX_PRODUCT_BITS`, and make the builtins that consume iterators in C check the limits per
item.
"""

from __future__ import annotations

import abc
import array
import builtins
import collections
import copy
import decimal
import operator
import types
from collections.abc import Callable
from typing import Any

from RestrictedPython.Guards import (
    guarded_iter_unpack_sequence,
    guarded_unpack_sequence,
    safe_builtins,
)

from ._restricted_modules import _Modules
from ._restricted_policy import PROGRAM, STATEFUL_ATTRS, _check_attr_name
from ._restricted_run import _Run
from .guest.cm_guest import pending, settling


class _Printer:
    """What RestrictedPython's `print` rewrite calls (`_print._call_print`)."""

    def __init__(self, run: _Run, getattr_: Callable[..., Any]) -> None:
        self._run = run
        self._getattr = getattr_

    def _call_print(self, *objects: Any, **kwargs: Any) -> None:
        if kwargs.get("file") is None:
            kwargs["file"] = self._run.out
        else:
            self._getattr(kwargs["file"], "write")
        builtins.print(*objects, **kwargs)

    def __call__(self) -> str:
        raise NameError("name 'printed' is not defined")


class _ClassFactory:
    """`__metaclass__` of every class statement: the metaclass the bases call for, and the
    class recorded as the program's own (so the program may write to it and its
    instances)."""

    def __init__(self, owned: set[type]) -> None:
        self._owned = owned

    @staticmethod
    def _meta(bases: tuple[Any, ...]) -> type:
        winner: type = type
        for base in bases:
            meta = type(base)
            if issubclass(winner, meta):
                continue
            if issubclass(meta, winner):
                winner = meta
                continue
            raise TypeError("metaclass conflict: the metaclass of a derived class must be a "
                            "(non-strict) subclass of the metaclasses of all its bases")
        return winner

    def __prepare__(self, name: str, bases: tuple[Any, ...], **kwds: Any) -> Any:
        return self._meta(bases).__prepare__(name, bases, **kwds)

    def __call__(self, name: str, bases: tuple[Any, ...], ns: Any, **kwds: Any) -> type:
        cls: type = self._meta(bases)(name, bases, ns, **kwds)
        self._owned.add(cls)
        return cls


class _ReadOnly:
    """What `_write_` returns for objects the program does not own."""

    __slots__ = ("_what",)
    _what: str

    def __init__(self, ob: Any) -> None:
        object.__setattr__(self, "_what", type(ob).__name__)

    def _refuse(self, *args: Any) -> None:
        raise TypeError(f"a {self._what} object is read-only in the sandbox (only the "
                        "program's own objects and plain containers can be changed)")

    __setattr__ = __delattr__ = __setitem__ = __delitem__ = _refuse


# Types whose instances a program can only reach as its own (or as per-run copies): the
# decimal context of the worker thread is fresh per run, module-level ones are copied.
_WRITABLE = (dict, list, set, bytearray, types.SimpleNamespace, collections.deque,
             array.array, decimal.Context)
_SEQUENCES: dict[type, int] = {str: 1, bytes: 1, bytearray: 1, list: 8, tuple: 8}
_INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul,
    "/=": operator.itruediv, "//=": operator.ifloordiv, "%=": operator.imod,
    "**=": operator.ipow, "<<=": operator.ilshift, ">>=": operator.irshift,
    "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor, "@=": operator.imatmul}
_CONTAINERS = frozenset({list, tuple, dict, set, frozenset, str, bytes, bytearray})
_SHORT_RANGE = 1_000_000


# Multiplying integers runs in C, superlinear in their size, and cannot be interrupted: a
# product of 2**22 bits (512 KiB) takes about a second, so larger ones are refused up front.
MAX_PRODUCT_BITS = 1 << 22


def _int_cost(op: str, bits: int) -> None:
    if bits > MAX_PRODUCT_BITS:
        raise ValueError(f"the result of {op} would be an integer of about {bits} bits, over "
                         f"the sandbox's limit of {MAX_PRODUCT_BITS} bits for products (C "
                         "arithmetic cannot be interrupted by the wall-clock limit)")


def _tick_each(iterator: Any, tick: Callable[[], bool]) -> Any:
    for item in iterator:
        tick()
        yield item


_EXCEPTIONS = {k: v for k, v in vars(builtins).items()
               if isinstance(v, type) and issubclass(v, BaseException)}
_PLAIN_BUILTINS = """
    abs aiter all anext any ascii bin bool bytearray bytes callable chr classmethod complex
    dict dir divmod enumerate filter float format frozenset hash hex id int isinstance
    issubclass iter len list map max memoryview min next object oct ord property range repr
    reversed round set slice sorted staticmethod str sum super tuple zip
""".split()


def _program_function(ob: Any) -> bool:
    """A function the program defined, or a wrapper (`functools.cache`) of one."""
    ob = getattr(ob, "__wrapped__", ob) if not isinstance(ob, types.FunctionType) else ob
    return isinstance(ob, types.FunctionType) and ob.__code__.co_filename == PROGRAM


def _shared_state(ob: Any, name: str, owned: set[type]) -> None:
    """Refuse the attributes of `STATEFUL_ATTRS` on what the program does not own: an
    ABC's `register` (on `abc.ABCMeta` itself too) would change the host's class
    registry, seen by every later run and by the host; a library function's cache
    counters would tell a run what earlier runs called it with."""
    if name not in STATEFUL_ATTRS:
        return
    if name == "register":
        if (isinstance(ob, type) and issubclass(ob, abc.ABCMeta)) or (
                isinstance(ob, abc.ABCMeta) and ob not in owned):
            raise AttributeError(
                '"register" is available in the sandbox only on an ABC the program '
                "defined (registering with a library ABC changes the interpreter for every "
                "later run); subclass the ABC instead")
    elif not _program_function(ob) and hasattr(ob, "cache_info"):
        raise AttributeError(f'"{name}" of a library function is not available in the '
                             "sandbox (its cache is shared by every run)")


def _unshared(ob: Any, name: str, value: Any, owned: set[type]) -> Any:
    """`value`, or a copy of it when it is a mutable container kept as an attribute of a
    class the program did not define (`calendar.HTMLCalendar.cssclasses`): changing it
    would change that class for the host and for every later run."""
    if not isinstance(value, _WRITABLE):
        return value
    cls = ob if isinstance(ob, type) else type(ob)
    for klass in cls.__mro__:
        if klass not in owned and vars(klass).get(name) is value:
            return copy.copy(value)
    return value


def _program_builtins(run: _Run, modules: _Modules, owned: set[type]) -> dict[str, Any]:

    def getattr_(ob: Any, name: Any, *default: Any) -> Any:
        ob = pending.settle(ob)
        _check_attr_name(name, ob, owned)
        _shared_state(ob, name, owned)
        value = _unshared(ob, name, getattr(ob, name, *default), owned)
        if name == "__name__" and type(value) is not str:
            raise AttributeError('"__name__" is readable in the sandbox only as a str')
        if isinstance(value, types.ModuleType):
            view = modules.view(value)
            if view is None:
                raise AttributeError(f"module {value.__name__!r} is not available in the "
                                     "sandbox")
            return view
        return value

    def guarded_getattr(ob: Any, name: Any, *default: Any) -> Any:
        if len(default) > 1:
            raise TypeError(f"getattr expected at most 3 arguments, got {2 + len(default)}")
        return getattr_(ob, name, *default)

    def hasattr_(ob: Any, name: Any) -> bool:
        try:
            getattr_(ob, name)
        except AttributeError:
            return False
        return True

    def owns(ob: Any) -> bool:
        if isinstance(ob, type):
            return ob in owned
        if isinstance(ob, types.FunctionType):
            return ob.__code__.co_filename == PROGRAM
        return any(cls in owned for cls in type(ob).__mro__)

    def write(ob: Any) -> Any:
        ob = pending.settle(ob)
        if isinstance(ob, _WRITABLE) or owns(ob):
            return ob
        return _ReadOnly(ob)

    def setattr_(ob: Any, name: Any, value: Any) -> None:
        _check_attr_name(name)
        setattr(write(ob), name, value)

    def delattr_(ob: Any, name: Any) -> None:
        _check_attr_name(name)
        delattr(write(ob), name)

    def size(x: Any) -> int | None:
        per_item = _SEQUENCES.get(type(x))
        return None if per_item is None else len(x) * per_item

    def add(a: Any, b: Any) -> Any:
        sa, sb = size(a), size(b)
        if sa is not None and sb is not None:
            run.too_big(sa + sb)
        return a + b

    def mul(a: Any, b: Any) -> Any:
        ta, tb = type(a), type(b)
        if ta is int and tb is int:
            _int_cost("*", a.bit_length() + b.bit_length())
        elif ta is int or tb is int:
            n, seq = (a, b) if ta is int else (b, a)
            s = size(seq)
            if s is not None and n > 0:
                run.too_big(s * n)
        return a * b

    def pow_check(a: Any, b: Any) -> None:
        if type(a) is int and type(b) is int and b > 0 and abs(a) > 1:
            _int_cost("**", b * (a.bit_length() - 1) + 1)

    def pow_(a: Any, b: Any, *mod: Any) -> Any:
        if not mod:
            pow_check(a, b)
        return pow(a, b, *mod)

    def lshift(a: Any, b: Any) -> Any:
        if type(a) is int and type(b) is int and a and b > 0:
            run.too_big((a.bit_length() + b) / 8)
        return a << b

    def inplacevar(op: str, x: Any, y: Any) -> Any:
        if op == "+=":
            sx, sy = size(x), size(y)
            if sx is not None and sy is not None:
                run.too_big(sx + sy)
        elif op == "*=":
            mul(x, y)  # the check only: a product of the same size is built below
        elif op == "**=":
            pow_check(x, y)
        elif op == "<<=" and type(x) is int and type(y) is int and x and y > 0:
            run.too_big((x.bit_length() + y) / 8)
        return _INPLACE[op](x, y)

    def type_(ob: Any, *more: Any) -> type:
        if more:
            raise TypeError("type() takes 1 argument in the sandbox; creating classes with "
                            "type(name, bases, dict) is not available")
        return type(ob)

    def ticking(iterable: Any) -> Any:
        """`iterable`, or a generator that checks the limits per item when it may be long
        (C code consuming it would otherwise not stop at the deadline)."""
        kind = type(iterable)
        if kind in _CONTAINERS:
            return iterable
        if kind is range:
            try:
                if len(iterable) <= _SHORT_RANGE:
                    return iterable
            except OverflowError:
                pass
        return _tick_each(iter(iterable), run.tick)

    def consuming(fn: Callable[..., Any], all_args: bool = False) -> Callable[..., Any]:
        """`fn` with its iterable argument(s) made `ticking`."""
        if all_args:
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                return fn(*map(ticking, args), **kwargs)
        else:
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                if len(args) == 1:
                    args = (ticking(args[0]),)
                return fn(*args, **kwargs)
        wrapped.__name__ = wrapped.__qualname__ = fn.__name__
        wrapped.__doc__ = fn.__doc__
        return wrapped

    def map_(function: Any, *iterables: Any) -> Any:
        return map(function, *map(ticking, iterables))

    def filter_(function: Any, iterable: Any) -> Any:
        return filter(function, ticking(iterable))

    scope: dict[str, Any] = {n: getattr(builtins, n) for n in _PLAIN_BUILTINS}
    # Functions only: the container types stay the real classes (isinstance, subclassing,
    # the exact-type JSON check), so `list(endless_iterator)` is not stopped.
    for name in ("sum", "min", "max", "sorted", "any", "all", "enumerate"):
        scope[name] = consuming(getattr(builtins, name))
    scope["zip"] = consuming(zip, all_args=True)
    scope["map"], scope["filter"] = map_, filter_
    scope.update(_EXCEPTIONS)
    scope.update({k: v for k, v in safe_builtins.items()
                  if k not in ("setattr", "delattr", "_getattr_")})
    scope.update({
        "None": None, "True": True, "False": False, "Ellipsis": Ellipsis,
        "NotImplemented": NotImplemented,
        "getattr": guarded_getattr, "hasattr": hasattr_, "setattr": setattr_,
        "delattr": delattr_, "type": type_, "pow": pow_, "__import__": modules.import_,
        "__metaclass__": _ClassFactory(owned),
        "_getattr_": getattr_, "_getitem_": operator.getitem, "_getiter_": iter,
        "_write_": write, "_inplacevar_": inplacevar,
        "_apply_": lambda f, *a, **kw: f(*a, **kw),
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_unpack_sequence_": guarded_unpack_sequence,
        "_print_": lambda getattr_=None: _Printer(run, getattr_ or scope["_getattr_"]),
        "_tick_": run.tick, "_add_": add, "_mul_": mul, "_pow_": pow_, "_lshift_": lshift,
    })
    # A pending tool call (async code) is its value to the guards: they check exact types.
    for name in ("_add_", "_mul_", "_pow_", "pow", "_lshift_", "_inplacevar_"):
        scope[name] = _settling(scope[name])
    scope["isinstance"] = pending.isinstance_
    scope[settling.SETTLE_NAME] = pending.settle
    scope[settling.CONTAINS_NAME] = pending.contains
    return scope


def _settling(fn: Callable[..., Any]) -> Callable[..., Any]:
    def settled(*args: Any) -> Any:
        return fn(*map(pending.settle, args))
    settled.__name__ = settled.__qualname__ = fn.__name__
    settled.__doc__ = fn.__doc__
    return settled
