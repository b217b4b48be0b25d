"""The modules a restricted-tier program may import, and the views of them it gets.

`ALLOWED_MODULES` is the tier's own short list; `_Modules` is the program's `__import__`.
It hands out each allowed module as a read-only `_ModuleView` (one per module per run)
whose members are filtered: no underscored names, no submodules off the list, only the
names `_ONLY` keeps of `asyncio`, `io`, `types` and `warnings`, none of `_DROPPED` (setters
of process-wide state, printers to the host's streams, string evaluators). Mutable members
are copied, and some are replaced by per-run ones (`_Modules._overrides`: a fresh `random`
generator, `time.sleep` and the event loop bounded by the run, `pprint` and `warnings.warn`
writing to the captured streams, `operator.attrgetter` under the attribute-name rule).
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import functools
import importlib
import operator
import random
import types
from typing import Any

from ._restricted_policy import STATEFUL_ATTRS, _check_attr_name
from ._restricted_run import _Run, _RunLoop
from .guest.cm_guest import aio, introspect, modules, pending, runtime

# The restricted tier's own list, a subset of the guest's (`modules.txt`): pure-computation
# modules whose members are safe to share with the host process through a read-only view.
# Everything else the guest offers is refused here (docs/security.md, "The restricted
# tier"): in this process `pathlib`, `logging`, `io` files, `os`, `sys`, `importlib`,
# `threading` or `gc` would reach the host itself.
ALLOWED_MODULES = frozenset("""
    __future__ abc array asyncio base64 binascii bisect calendar collections collections.abc
    colorsys contextlib copy csv dataclasses datetime decimal difflib enum fractions
    functools graphlib hashlib heapq html inspect io ipaddress itertools json math numbers operator
    pprint random re secrets statistics string struct textwrap time types typing
    unicodedata urllib urllib.parse uuid warnings zlib
""".split()) & modules.AVAILABLE

# Modules C code imports lazily while a program frame is running (`datetime.strptime` ->
# `_strptime`); a program cannot spell them (names starting with `_` do not compile).
_IMPLICIT_MODULES = frozenset({"_strptime", "_pydatetime", "_pydecimal"})


class _ModuleView:
    # A read-only, filtered view of an allowed module (one per module per run). It has no
    # `__name__`, so `from m import x` cannot fall back to `sys.modules`; its `__doc__` is
    # the module's (what `help(module)` shows).

    __slots__ = ("_attrs", "_doc", "_label")

    def __init__(self, label: str, attrs: dict[str, Any], doc: str | None = None) -> None:
        object.__setattr__(self, "_label", label)
        object.__setattr__(self, "_attrs", attrs)
        object.__setattr__(self, "_doc", doc)

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        doc: str | None = self._doc
        return doc

    def __getattr__(self, name: str) -> Any:
        try:
            return self._attrs[name]
        except KeyError:
            raise AttributeError(f"module {self._label!r} has no attribute {name!r} in the "
                                 "sandbox") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"module {self._label!r} is read-only in the sandbox")

    __delattr__ = __setattr__  # type: ignore[assignment]

    def __dir__(self) -> list[str]:
        return sorted(self._attrs)

    def __repr__(self) -> str:
        return f"<module {self._label!r}>"


_ASYNCIO_NAMES = frozenset("""
    ALL_COMPLETED FIRST_COMPLETED FIRST_EXCEPTION Barrier BoundedSemaphore BrokenBarrierError
    CancelledError Condition Event Future IncompleteReadError InvalidStateError
    LifoQueue LimitOverrunError Lock PriorityQueue Queue QueueEmpty QueueFull Semaphore Task
    TaskGroup Timeout TimeoutError all_tasks as_completed create_task current_task
    ensure_future gather get_running_loop iscoroutine iscoroutinefunction isfuture shield
    sleep timeout timeout_at wait wait_for
""".split())
_IO_NAMES = frozenset("""
    BufferedIOBase BytesIO DEFAULT_BUFFER_SIZE IOBase RawIOBase SEEK_CUR SEEK_END SEEK_SET
    StringIO TextIOBase TextIOWrapper UnsupportedOperation
""".split())
_TYPES_NAMES = frozenset("""
    AsyncGeneratorType BuiltinFunctionType BuiltinMethodType CoroutineType
    DynamicClassAttribute EllipsisType GeneratorType GenericAlias MappingProxyType
    MethodType NoneType NotImplementedType SimpleNamespace UnionType coroutine
""".split())
# Members left out of the views: setters of process-wide state, printers to the host's
# streams, and functions that evaluate strings or read the host.
_DROPPED = {
    "abc": {"get_cache_token"},                    # counts registrations in every run
    # The Locale* calendars switch the process's locale (`locale.setlocale`) while they
    # format, under every thread of the process.
    "calendar": {"setfirstweekday", "c", "prcal", "prmonth", "prweek", "main",
                 "different_locale", "LocaleTextCalendar", "LocaleHTMLCalendar"},
    "contextlib": {"redirect_stdout", "redirect_stderr", "chdir"},
    "csv": {"register_dialect", "unregister_dialect", "field_size_limit"},
    "enum": {"global_enum"},                       # writes into sys.modules[cls.__module__]
    "functools": {"singledispatch", "singledispatchmethod"},
    "pprint": {"PrettyPrinter"},                   # prints to the host's sys.stdout
    "string": {"Formatter"},
    "time": {"tzset", "clock_settime", "clock_settime_ns", "pthread_getcpuclockid"},
    "typing": {"get_type_hints"},
    "uuid": {"getnode", "uuid1"},                  # the host's MAC address, maybe via `ip`
}
# `inspect`: reading signatures and docstrings only, `signature` replaced (`_overrides`) by
# one that shows a host object in a signature as text; no frames, sources or members.
_INSPECT_NAMES = frozenset({"signature", "getdoc", "cleandoc", "Parameter"})
_ONLY = {"asyncio": _ASYNCIO_NAMES, "io": _IO_NAMES, "types": _TYPES_NAMES,
         "warnings": frozenset(), "inspect": _INSPECT_NAMES}
_MUTABLE = (list, dict, set, bytearray)


def _refuse_stateful(name: str) -> None:
    if name in STATEFUL_ATTRS:
        raise AttributeError(f'"{name}" cannot be reached through operator in the sandbox '
                             "(it may change or read state the whole interpreter shares); "
                             "use the attribute directly")


def _safe_attrgetter(*names: str) -> Any:
    for dotted in names:
        if type(dotted) is not str:
            raise TypeError("attribute name must be a string")
        for part in dotted.split("."):
            _check_attr_name(part)
            _refuse_stateful(part)
            if part in ("format", "format_map"):
                raise NotImplementedError("Using the format*() methods of `str` is not safe")
    return operator.attrgetter(*names)


def _safe_methodcaller(name: str, /, *args: Any, **kwargs: Any) -> Any:
    _check_attr_name(name)
    _refuse_stateful(name)
    if name in ("format", "format_map"):
        raise NotImplementedError("Using the format*() methods of `str` is not safe")
    return operator.methodcaller(name, *args, **kwargs)


def _safe_update_wrapper(wrapper: Any, wrapped: Any) -> Any:
    """`functools.update_wrapper` with its default attribute lists only."""
    return functools.update_wrapper(wrapper, wrapped)


def _safe_wraps(wrapped: Any) -> Any:
    return functools.wraps(wrapped)


class _Modules:
    """The program's `__import__` and the per-run views it hands out."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.views: dict[str, _ModuleView] = {}
        self.rng = random.Random()

    def view(self, module: types.ModuleType) -> _ModuleView | None:
        name = module.__name__
        if name not in ALLOWED_MODULES:
            return None
        cached = self.views.get(name)
        if cached is not None:
            return cached
        attrs: dict[str, Any] = {}
        view = _ModuleView(name, attrs, module.__doc__)
        self.views[name] = view       # before filling: modules refer to each other
        only = _ONLY.get(name)
        dropped = _DROPPED.get(name, ())
        for key, value in list(vars(module).items()):
            if key.startswith("_") or key in dropped or (only is not None and key not in only):
                continue
            if isinstance(value, types.ModuleType):
                sub = self.view(value)
                if sub is not None:
                    attrs[key] = sub
                continue
            if isinstance(value, _MUTABLE):
                value = copy.copy(value)
            attrs[key] = value
        attrs.update(self._overrides(name, module))
        return view

    def _overrides(self, name: str, module: types.ModuleType) -> dict[str, Any]:
        run = self.run
        if name == "random":
            shared = getattr(module, "_inst", None)
            return {k: getattr(self.rng, v.__name__) for k, v in vars(module).items()
                    if not k.startswith("_") and callable(v)
                    and getattr(v, "__self__", None) is shared}
        if name == "time":
            return {"sleep": run.sleep}
        if name == "asyncio":
            return {**aio.ENTRY_POINTS, "run": self.asyncio_run,
                    "new_event_loop": lambda: _RunLoop(run),
                    "get_event_loop": asyncio.get_running_loop}
        if name == "json":
            functions: dict[str, Any] = pending.json_functions(module)
            return functions
        if name == "decimal":
            return {k: copy.copy(v) for k, v in vars(module).items()
                    if isinstance(v, module.Context)}
        if name == "inspect":
            return {"signature": introspect.signature}
        if name == "operator":
            return {"attrgetter": _safe_attrgetter, "methodcaller": _safe_methodcaller}
        if name == "functools":
            return {"update_wrapper": _safe_update_wrapper, "wraps": _safe_wraps}
        if name == "pprint":
            def pprint(obj: Any, stream: Any = None, *args: Any, **kwargs: Any) -> None:
                module.pprint(obj, run.out if stream is None else stream, *args, **kwargs)
            return {"pprint": pprint, "pp": pprint}
        if name == "warnings":
            def warn(message: Any, category: Any = None, stacklevel: int = 1,
                     source: Any = None) -> None:
                cls = category or (type(message) if isinstance(message, Warning)
                                   else UserWarning)
                run.err.write(f"{cls.__name__}: {message}\n")
            return {"warn": warn}
        return {}

    def asyncio_run(self, main: Any, *, debug: bool | None = None) -> Any:
        with asyncio.Runner(debug=debug, loop_factory=lambda: _RunLoop(self.run)) as runner:
            return runner.run(main)

    def import_(self, name: str, globals: Any = None, locals: Any = None,
                fromlist: Any = (), level: int = 0) -> Any:
        if level != 0:
            raise ImportError("attempted relative import with no known parent package (a "
                              "sandboxed program is not part of a package)")
        if name in _IMPLICIT_MODULES:
            return builtins.__import__(name, None, None, fromlist, 0)
        if type(name) is not str or name not in ALLOWED_MODULES:
            missing = name.partition(".")[0] if type(name) is str \
                and name.partition(".")[0] not in ALLOWED_MODULES else name
            raise ModuleNotFoundError(f"No module named {missing!r}{runtime.NOT_AVAILABLE}",
                                      name=missing)
        module = importlib.import_module(name)
        for item in fromlist or ():
            sub = getattr(module, item, None)
            if isinstance(sub, types.ModuleType) and sub.__name__ not in ALLOWED_MODULES:
                raise ModuleNotFoundError(
                    f"No module named {sub.__name__!r}{runtime.NOT_AVAILABLE}",
                    name=sub.__name__)
        if not fromlist:
            module = importlib.import_module(name.partition(".")[0])
        return self.view(module)
