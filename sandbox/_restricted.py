"""`RestrictedSandbox`: programs run in this process under RestrictedPython (docs/design.md §3,
Tiers).

This tier is WEAKER than `WasmSandbox`. Use it for trusted code and for comparing policies,
never for untrusted programs:

- It shares the host process: the program runs on a thread of the host's interpreter, beside
  the host's modules, objects and secrets. What keeps them apart is a compile-time rewrite of
  the program (RestrictedPython) and runtime guards, not an isolation boundary; a gap in
  either is an escape into the host.
- Memory is not isolated. Single operations that would obviously allocate more than
  `limits.memory_bytes` (`'x' * 10**10`, `s + s`, `10**10**9`, `1 << 10**10`) are refused, and
  growth of the whole process's resident memory by more than `memory_bytes` during the run
  ends it; anything else (a huge allocation inside C code, a bomb decompressed by `zlib`)
  reaches the host's allocator. Concurrent runs share that process-wide measure.
- CPU limits are best-effort. The wall clock is checked at every loop iteration, function
  entry, exception handler and `finally` block of the program, and a watchdog then injects
  an exception into the worker thread (`PyThreadState_SetAsyncExc`). Neither can interrupt
  one long C call (huge integer arithmetic, a catastrophic regular expression): it holds the
  GIL, so the host waits for it too. The caller's thread otherwise returns by about twice the
  wall-clock limit; a worker that is still running then is left behind as a daemon thread.
- No fuel metering (`limits.fuel` is ignored), no `stack_bytes` (Python's recursion limit
  applies), no `max_concurrent_subcalls` (the dispatcher applies it).
- No recording or replay of clocks and randomness: `RunRequest.tape` is ignored and
  `RunOutcome.tape` is None (the program reads the host's own clocks).

What matches `WasmSandbox` (the guest runtime's own code is reused: `sandbox/guest/cm_guest`):
the namespace (tools by alias, `tools`, `call_tool(name, /, **kwargs)`, the `ToolCallError`
family), call-shape `TypeError`s, the JSON-only argument check, the sub-call wire format and
budget, the final-expression value, capped output with its marker, tracebacks of program
lines only, typed outcomes. Top-level `await`, `async def`, `asyncio.run`, `gather`,
`TaskGroup` and awaited tool calls work (on a per-run event loop on the worker thread whose
idle step sends pending tool calls as one batch, as in the guest).

What differs, on purpose or because RestrictedPython refuses it:

- Imports: a short list of pure-computation modules (`ALLOWED_MODULES`), not the guest's
  whole standard library: `sys`, `os`, `pathlib`, `logging`, `importlib`, `threading`,
  `gc`, `weakref`, `zoneinfo` and the rest would hand out the host; every module arrives
  as a read-only view whose members are filtered (no submodules off the list, no `io.open`,
  no `string.Formatter`, no `typing.get_type_hints` or `functools.singledispatch` (both
  `eval` annotations), no setters of process-wide state such as `csv.register_dialect` or
  `warnings.simplefilter`); `random` is a fresh generator per run; `time.sleep` and the
  asyncio loop are bounded by the run.
- Attributes whose name starts with `_` (`__class__`, `__globals__`, `super().__init__`),
  frame/code/traceback attributes, `str.format`/`format_map`, `type(name, bases, dict)`,
  `match`, `except*`, `nonlocal`, `eval`/`exec`/`open`, and methods named like dunders other
  than `__init__`, comparisons and `__contains__` are refused, most at compile time (a
  `SyntaxError` naming the rule).
- Writes go only to the program's own objects (instances of classes it defined, its
  functions) and to plain containers; attribute writes on anything else raise `TypeError`.
- No `sys.stdout`: `print` writes to the captured stdout; stderr carries `warnings.warn`.
"""

from __future__ import annotations

import array
import ast
import asyncio
import builtins
import collections
import contextlib
import copy
import ctypes
import decimal
import functools
import importlib
import linecache
import operator
import os
import random
import threading
import time
import types
from collections.abc import Callable
from typing import Any, ClassVar

import msgspec
from RestrictedPython.Guards import (
    guarded_iter_unpack_sequence,
    guarded_unpack_sequence,
    safe_builtins,
)
from RestrictedPython.transformer import (
    INSPECT_ATTRIBUTES,
    RestrictingNodeTransformer,
    copy_locations,
)

from ._host import GuestOutcome, HostStop, RunHost, decode_guest, outcome, refused_as_too_large
from ._limits import SandboxLimits
from ._protocol import AnyRunError, Dispatch, RunOutcome, RunRequest, TimeLimitExceeded
from .guest.cm_guest import aio, callsite, modules, pending, runtime
from .guest.cm_guest.errors import LimitReached
from .guest.cm_guest.output import CappedSink, text_stream
from .guest.cm_guest.tools import Bridge

PROGRAM = runtime.PROGRAM_FILENAME

# The restricted tier's own list, a subset of the guest's (`modules.txt`): pure-computation
# modules whose members are safe to share with the host process through a read-only view.
# Everything else the guest offers is refused here (docs/security.md, "The restricted
# tier"): in this process `pathlib`, `logging`, `io` files, `os`, `sys`, `importlib`,
# `threading` or `gc` would reach the host itself.
ALLOWED_MODULES = frozenset("""
    __future__ abc array asyncio base64 binascii bisect calendar collections collections.abc
    colorsys contextlib copy csv dataclasses datetime decimal difflib enum fractions
    functools graphlib hashlib heapq html io ipaddress itertools json math numbers operator
    pprint random re secrets statistics string struct textwrap time types typing
    unicodedata urllib urllib.parse uuid warnings zlib
""".split()) & modules.AVAILABLE

# Modules C code imports lazily while a program frame is running (`datetime.strptime` ->
# `_strptime`); a program cannot spell them (names starting with `_` do not compile).
_IMPLICIT_MODULES = frozenset({"_strptime", "_pydatetime", "_pydecimal"})

_POLL_S = 0.02            # watchdog period
_REINJECT_S = 0.1         # after a stop, how often it is injected again until the worker ends
_LATE_REAPER_S = 60.0     # how long an abandoned worker keeps being stopped
# Limits after which a worker still running program code has a stop injected (after a
# grace period): the run must end even where program code does not tick.
_INJECTED_LIMITS = frozenset({"timeout", "abort", "memory", "paused"})


# ---- compile ---------------------------------------------------------------------------

class _Policy(RestrictingNodeTransformer):
    """RestrictedPython's policy, plus: async syntax (checked like its sync forms),
    annotated assignments, size-guarded `+ * ** <<`, and a `_tick_()` limit check at the
    start of every loop body, function body, exception handler and `finally` block and in
    every comprehension."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.first_error: tuple[int, int, str] | None = None

    def error(self, node: ast.AST, info: str) -> None:
        if self.first_error is None:
            self.first_error = (getattr(node, "lineno", 1) or 1,
                                getattr(node, "col_offset", 0) or 0, info)
        super().error(node, info)

    @staticmethod
    def _tick(anchor: ast.AST) -> ast.Expr:
        call = ast.Call(func=ast.Name("_tick_", ast.Load()), args=[], keywords=[])
        stmt = ast.Expr(value=call)
        copy_locations(stmt, anchor)  # type: ignore[arg-type]
        copy_locations(call, anchor)  # type: ignore[arg-type]
        return stmt

    def _ticked(self, node: Any) -> Any:
        if node is not None:
            node.body.insert(0, self._tick(node))
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        if node.name == "__del__":
            self.error(node, '"__del__" is an invalid method name in the sandbox.')
        return self._ticked(super().visit_FunctionDef(node))

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> Any:
        self.check_name(node, node.name, allow_magic_methods=True)
        self.check_function_argument_names(node)
        with self.print_info.new_print_scope():
            node = self.node_contents_visit(node)
            self.inject_print_collector(node)  # type: ignore[arg-type]
        return self._ticked(node)

    def visit_Await(self, node: ast.Await) -> Any:
        return self.node_contents_visit(node)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> Any:
        return self._ticked(self.node_contents_visit(node))

    def visit_AsyncWith(self, node: ast.AsyncWith) -> Any:
        return self.visit_With(node)  # type: ignore[arg-type]

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        if node.attr in _CONTEXT_ATTRS and isinstance(node.ctx, ast.Load):
            # Checked at run time by `_getattr_` against the object (see _CONTEXT_ATTRS).
            value = self.visit(node.value)
            call = ast.Call(func=ast.Name("_getattr_", ast.Load()),
                            args=[value, ast.Constant(node.attr)], keywords=[])
            copy_locations(call, node)
            return call
        return super().visit_Attribute(node)

    def visit_Name(self, node: ast.Name) -> Any:
        if node.id == "__name__" and isinstance(node.ctx, ast.Load):
            return node               # `if __name__ == "__main__":` reads a plain str
        return super().visit_Name(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        return self.node_contents_visit(node)

    def visit_For(self, node: ast.For) -> Any:
        return self._ticked(super().visit_For(node))

    def visit_While(self, node: ast.While) -> Any:
        return self._ticked(super().visit_While(node))

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> Any:
        return self._ticked(super().visit_ExceptHandler(node))

    def visit_Try(self, node: Any) -> Any:
        node = super().visit_Try(node)
        if node.finalbody:
            node.finalbody.insert(0, self._tick(node.finalbody[0]))
        return node

    def visit_comprehension(self, node: Any) -> Any:
        node = super().visit_comprehension(node)
        node.ifs.append(self._tick(node.target).value)
        return node

    _GUARDED_OPS: ClassVar[dict[type[ast.operator], str]] = {
        ast.Add: "_add_", ast.Mult: "_mul_", ast.Pow: "_pow_", ast.LShift: "_lshift_"}

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        node = self.node_contents_visit(node)
        guard = self._GUARDED_OPS.get(type(node.op))
        if guard is None:
            return node
        call = ast.Call(func=ast.Name(guard, ast.Load()), args=[node.left, node.right],
                        keywords=[])
        copy_locations(call, node)
        return call


def _compile(source: str) -> tuple[types.CodeType, bool, Any]:
    """RestrictedPython's checks and rewrites, then the guest's final-expression rule, then
    `compile` with top-level await allowed (`compile_restricted` drops compile flags, so the
    policy is applied here the way `compile_restricted_exec` applies it)."""
    tree = ast.parse(source, PROGRAM, "exec")
    sites = callsite.analyse(tree)            # before the policy rewrites the tree
    has_value = bool(tree.body) and isinstance(tree.body[-1], ast.Expr)
    errors: list[str] = []
    policy = _Policy(errors, [], {})
    tree = policy.visit(tree)
    if errors:
        lineno, col, info = policy.first_error or (1, 0, errors[0])
        lines = source.splitlines()
        text = lines[lineno - 1] if 0 < lineno <= len(lines) else None
        raise SyntaxError(info, (PROGRAM, lineno, col + 1, text))
    if has_value:
        last = tree.body[-1]
        tree.body[-1] = ast.copy_location(
            ast.Assign(targets=[ast.Name(runtime.VALUE_SLOT, ast.Store())], value=last.value),
            last)
    ast.fix_missing_locations(tree)
    code = compile(tree, PROGRAM, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
                   dont_inherit=True)
    return code, has_value, sites


# ---- one run's state -------------------------------------------------------------------

class _Stop(BaseException):
    """Injected into the worker thread by the watchdog once the run is over."""


_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _rss_bytes() -> int | None:
    """Resident memory of the whole process (Linux), or None where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


class _Run(RunHost):
    """Host-owned state of one run (`RunHost`), shared by the worker and the watchdog,
    plus what this tier adds: the program's limit state, the worker/watchdog handshake,
    the program's streams and tool bridge."""

    def __init__(self, limits: SandboxLimits, dispatch: Dispatch,
                 cancel: threading.Event | None) -> None:
        super().__init__(limits, dispatch, cancel)
        self.state = runtime.RunState()
        self.lock = threading.Lock()
        self.ident: int | None = None
        self.done = False          # the program's code has stopped running (worker side)
        self.over = False          # program code met after this raises at once
        self.error: BaseException | None = None
        self.has_value = False
        self.value: Any = None
        self.result: dict[str, Any] | None = None      # plain data, built by the worker
        self.out = text_stream(CappedSink(limits.output_bytes, self.state, "stdout",
                                          self.stdout.write))
        self.err = text_stream(CappedSink(limits.output_bytes, self.state, "stderr",
                                          self.stderr.write))
        self.bridge = Bridge(self.host_dispatch, limits.for_guest())

    # -- limits --

    def trip(self, limit: str, message: str) -> LimitReached:
        """Record `limit` (a RunError kind) for the run; the exception to raise into the
        program, which a bare `except:` may catch but cannot undo."""
        self.state.trip(limit, message)
        return LimitReached(self.state.limit, self.state.limit_message)

    def trip_time_up(self) -> LimitReached:
        error = self.time_up()
        return self.trip(error.kind, error.message)

    def tick(self) -> bool:
        """`_tick_()` in program code: cheap, raises once the run is over."""
        if self.state.limit is not None or self.over:
            raise LimitReached(self.state.limit or "timeout",
                               self.state.limit_message or "the run is over")
        return True

    def too_big(self, nbytes: float) -> None:
        if nbytes > self.limits.memory_bytes:
            self.state.trip("memory", f"the program tried to allocate about {int(nbytes)} "
                                      f"bytes, over its limit of {self.limits.memory_bytes}")
            raise MemoryError(self.state.limit_message)

    # -- worker/watchdog handshake --

    def finish(self) -> None:
        """The worker leaves program code: no stop is injected after this, and one pending
        is dropped."""
        with self.lock:
            self.done = True
            if self.ident is not None:
                _set_async_exc(ctypes.c_ulong(self.ident), None)

    def inject(self) -> None:
        with self.lock:
            if not self.done and self.ident is not None:
                _set_async_exc(ctypes.c_ulong(self.ident), ctypes.py_object(_Stop))

    # -- host services for the program (`RunHost`'s, a stop raised into the program) --

    def _stopped(self, stop: HostStop) -> LimitReached:
        return self.trip(stop.error.kind, stop.error.message)

    def host_dispatch(self, batch: str) -> str:
        """The guest Bridge's `dispatch`: `RunHost.dispatch_batch`, as in `WasmSandbox`."""
        if self.state.limit is not None:
            raise LimitReached(self.state.limit, self.state.limit_message)
        try:
            return self.dispatch_batch(batch)
        except HostStop as stop:
            raise self._stopped(stop) from None

    def sleep(self, seconds: float) -> None:
        """`time.sleep` and the idle event loop (`RunHost.sleep`)."""
        if self.state.limit is not None:
            raise LimitReached(self.state.limit, self.state.limit_message)
        try:
            super().sleep(seconds)
        except HostStop as stop:
            raise self._stopped(stop) from None


# ---- asyncio on the worker thread --------------------------------------------------------

class _RunSelector(aio._HostSelector):
    """The guest's `_HostSelector`, bound to one run instead of module globals."""

    def __init__(self, run: _Run) -> None:
        self._run = run

    def select(self, timeout: float | None) -> list[Any]:
        if timeout == 0:
            return []
        bridge = self._run.bridge
        if not bridge.idle:
            bridge.flush(timeout)
            return []
        if timeout is None:
            raise RuntimeError("deadlock: every task is waiting and nothing (no tool call, "
                               "no timer) can wake any of them")
        self._run.sleep(timeout)
        return []

    def close(self) -> None:
        pass


def _refused(what: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(f"{what} is not available in the sandbox")
    return refuse


class _RunLoop(aio.SandboxEventLoop):
    """`aio.SandboxEventLoop` for one run: tool calls batch through the run's Bridge, idle
    time sleeps through the run; threads, sockets, pipes, signals and subprocesses refused."""

    def __init__(self, run: _Run) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # the guest is unannotated
        self._selector = _RunSelector(run)
        self._run = run

    def close(self) -> None:
        if not self.is_running():
            self._run.bridge.abandon()
        asyncio.BaseEventLoop.close(self)



for _name in ("run_in_executor", "set_default_executor", "subprocess_exec", "subprocess_shell",
              "create_connection", "create_server", "create_datagram_endpoint",
              "create_unix_connection", "create_unix_server", "connect_accepted_socket",
              "connect_read_pipe", "connect_write_pipe", "getaddrinfo", "getnameinfo",
              "sock_recv", "sock_recv_into", "sock_recvfrom", "sock_recvfrom_into",
              "sock_sendall", "sock_sendto", "sock_connect", "sock_accept", "sock_sendfile",
              "sendfile", "start_tls", "add_reader", "add_writer", "add_signal_handler"):
    setattr(_RunLoop, _name, _refused(f"loop.{_name}()"))
del _name


# ---- modules as the program sees them ----------------------------------------------------

class _ModuleView:
    """A read-only, filtered view of an allowed module (one per module per run).

    It has no `__name__`, so `from m import x` cannot fall back to `sys.modules`."""

    __slots__ = ("_attrs", "_label")

    def __init__(self, label: str, attrs: dict[str, Any]) -> None:
        object.__setattr__(self, "_label", label)
        object.__setattr__(self, "_attrs", attrs)

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
    "calendar": {"setfirstweekday", "c", "prcal", "prmonth", "prweek", "main"},
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
_ONLY = {"asyncio": _ASYNCIO_NAMES, "io": _IO_NAMES, "types": _TYPES_NAMES,
         "warnings": frozenset()}
_MUTABLE = (list, dict, set, bytearray)


# Names starting with "_" that compile, each readable only where named here: `__name__`
# when it is a str, `super().__init__` in a class the program defined, an exception's
# chaining attributes, a namedtuple's API.
_NAMEDTUPLE_ATTRS = frozenset({"_asdict", "_replace", "_fields", "_make", "_field_defaults"})
_EXCEPTION_ATTRS = frozenset({"__cause__", "__context__", "__suppress_context__"})
_CONTEXT_ATTRS = _NAMEDTUPLE_ATTRS | _EXCEPTION_ATTRS | {"__init__", "__name__"}


def _context_allows(name: str, target: Any, owned: set[type] | None) -> bool:
    if name == "__name__":
        return True                   # `_getattr_` hands it out only if it is a str
    if name in _EXCEPTION_ATTRS:
        return isinstance(target, BaseException)
    if name == "__init__":
        return (owned is not None and type(target) is super
                and getattr(target, "__thisclass__", None) in owned)
    cls = target if isinstance(target, type) else type(target)
    return issubclass(cls, tuple) and any(
        "_fields" in vars(base) for base in cls.__mro__ if base is not tuple)


def _check_attr_name(name: Any, target: Any = None, owned: set[type] | None = None) -> str:
    """The rule every attribute read follows: `RestrictedPython.Guards.safer_getattr`'s,
    with no `default` pass-through, plus the context-bound names of `_CONTEXT_ATTRS`."""
    if type(name) is not str:
        raise TypeError("attribute name must be a str")
    if name in _CONTEXT_ATTRS and _context_allows(name, target, owned):
        return name
    if name.startswith("_"):
        raise AttributeError(f'"{name}" is an invalid attribute name because it starts '
                             'with "_"')
    if name in INSPECT_ATTRIBUTES:
        raise AttributeError(f'"{name}" is a restricted name, that is forbidden to access '
                             'in the sandbox')
    if name in ("format", "format_map") and (
            isinstance(target, str) or (isinstance(target, type) and issubclass(target, str))):
        raise NotImplementedError("Using the format*() methods of `str` is not safe")
    return name


def _safe_attrgetter(*names: str) -> Any:
    for dotted in names:
        if type(dotted) is not str:
            raise TypeError("attribute name must be a string")
        for part in dotted.split("."):
            _check_attr_name(part)
            if part in ("format", "format_map"):
                raise NotImplementedError("Using the format*() methods of `str` is not safe")
    return operator.attrgetter(*names)


def _safe_methodcaller(name: str, /, *args: Any, **kwargs: Any) -> Any:
    _check_attr_name(name)
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
        view = _ModuleView(name, attrs)
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


# ---- the program's guards and builtins ---------------------------------------------------

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


def _program_builtins(run: _Run, modules: _Modules, owned: set[type]) -> dict[str, Any]:

    def getattr_(ob: Any, name: Any, *default: Any) -> Any:
        ob = pending.settle(ob)
        _check_attr_name(name, ob, owned)
        value = getattr(ob, name, *default)
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
    return scope


def _settling(fn: Callable[..., Any]) -> Callable[..., Any]:
    def settled(*args: Any) -> Any:
        return fn(*map(pending.settle, args))
    settled.__name__ = settled.__qualname__ = fn.__name__
    settled.__doc__ = fn.__doc__
    return settled


# ---- running ---------------------------------------------------------------------------

_LINECACHE_LOCK = threading.Lock()
_STACK_SIZE_LOCK = threading.Lock()
# Nested C iterators (`itertools.chain(itertools.chain(...))`) recurse on the native stack
# without Python's recursion check; a worker stack this large (address space, not memory)
# outlasts what the memory limits let a program build, instead of overflowing the process.
_THREAD_STACK_BYTES = 1 << 30


def _execute(run: _Run, request: RunRequest) -> None:
    """The worker thread: compile and run the program, then turn its error or value into
    plain data (`run.result`) and drop the program's objects, all here: freeing a deeply
    nested structure recurses on this thread's large stack, not on the caller's."""
    run.ident = threading.get_ident()
    ns: dict[str, Any] = {}
    try:
        try:
            modules = _Modules(run)
            code, has_value, run.bridge.callsites = _compile(request.code)
            ns = runtime._namespace(run.bridge, [msgspec.to_builtins(t) for t in request.tools])
            ns["__builtins__"] = _program_builtins(run, modules, set())
            if code.co_flags & 0x80:       # CO_COROUTINE: top-level await
                modules.asyncio_run(eval(code, ns))
            else:
                exec(code, ns)
            value = run.bridge.finish(ns.get(runtime.VALUE_SLOT))
            if has_value:
                run.has_value = True
                run.value = value
        except BaseException as exc:
            run.error = exc
        run.finish()
    except BaseException as exc:           # a stop that landed between the program and finish
        run.error = run.error or exc
        run.finish()
    finally:
        run.over = True
        try:
            for stream in (run.out, run.err):
                with contextlib.suppress(BaseException):
                    stream.flush()
            run.result = _result(run, request.code)
        finally:
            run.error = run.value = None
            with contextlib.suppress(BaseException):
                ns.clear()


def _result(run: _Run, source: str) -> dict[str, Any]:
    """The guest's outcome shape for the program's own ending (limits are added later)."""
    exc = run.error
    if isinstance(exc, MemoryError):
        run.state.trip("memory", runtime.memory_message(run.limits.for_guest()))
    if isinstance(exc, _Stop):
        run.trip_time_up()
    if exc is not None:
        with _LINECACHE_LOCK:              # process-wide; the traceback reads it
            linecache.cache[PROGRAM] = (len(source), None, source.splitlines(True), PROGRAM)
            try:
                error = runtime._error(exc)
            finally:
                linecache.cache.pop(PROGRAM, None)
        return {"status": "error", "error": error}
    outcome: dict[str, Any] = {"status": "ok"}
    if run.has_value:
        runtime.finish_value(outcome, run.state, run.value, run.limits.output_bytes)
    return outcome


class RestrictedSandbox:
    """Runs programs in this process, compiled by RestrictedPython (docs/design.md §3, Tiers).

    WEAKER than `WasmSandbox` (see this module's docstring and docs/security.md, "The
    restricted tier"): it shares the host process, memory is not isolated, and CPU limits
    are best-effort. For trusted code only; `RestrictedProcessSandbox` (`_worker_host.py`)
    runs this tier in a supervised worker process, where C-level work cannot hold or grow
    the host.
    """

    #: The guest's list minus `REFUSED_MODULES`.
    allowed_modules: frozenset[str] = ALLOWED_MODULES

    def __init__(self, thread_stack_bytes: int = _THREAD_STACK_BYTES) -> None:
        """Args:
            thread_stack_bytes: the run thread's stack (address space; see
                `_THREAD_STACK_BYTES`). A worker process under an address-space limit
                uses less, and a native stack overflow then ends only that process.
        """
        self.thread_stack_bytes = thread_stack_bytes

    def run(self, request: RunRequest, dispatch: Dispatch,
            cancel: threading.Event | None = None) -> RunOutcome:
        """Run one program on a fresh worker thread and report how it ended.

        Args:
            request: source text, tool specs, limits (`fuel`, `stack_bytes` and
                `max_concurrent_subcalls` are not applied by this tier; nor is `tape`:
                the program reads the host's own clocks and randomness, so nothing is
                recorded or replayed and `outcome.tape` is None).
            dispatch: called on the worker thread per sub-call batch (a `SubCallBatch`;
                it returns a `SubCallReply`).
            cancel: set it from any thread to stop the run (`RunAborted`).
        Returns:
            The outcome; a tripped limit is a typed `error`, never an exception. The caller's
            thread returns within about 2x `limits.wall_clock_s` unless the worker holds the
            GIL in one long C call.
        """
        refused = refused_as_too_large(request.code, request.limits)
        if refused is not None:
            return refused
        run = _Run(request.limits, dispatch, cancel)
        worker = threading.Thread(target=_execute, args=(run, request), daemon=True,
                                  name="codemode-restricted-run")
        with _STACK_SIZE_LOCK:
            previous = threading.stack_size(self.thread_stack_bytes)
            try:
                worker.start()
            finally:
                threading.stack_size(previous)
        abandoned = self._watch(run, worker)
        return self._outcome(run, request, abandoned)

    def _watch(self, run: _Run, worker: threading.Thread) -> bool:
        """Wait for the worker, enforcing time, memory and cancel; True if it was left."""
        limits = run.limits
        baseline = _rss_bytes()
        hard = run.started + max(2 * limits.wall_clock_s, limits.wall_clock_s + 0.5)
        last_injection = 0.0
        # Program code notices a stop at its next `_tick_()`; injecting at once would land
        # in host code it calls (the event loop, the bridge) more often than needed.
        grace = min(0.25 * limits.wall_clock_s, 0.5)
        stopped_at: float | None = None
        while True:
            worker.join(_POLL_S)
            if not worker.is_alive():
                return False
            now = time.monotonic()
            if run.cancel.is_set():
                run.state.trip("abort", "the run was cancelled")
            elif now >= run.deadline:
                run.trip_time_up()
            elif baseline is not None:
                rss = _rss_bytes()
                if rss is not None and rss - baseline > limits.memory_bytes:
                    run.state.trip("memory", "the process grew by more than the run's "
                                             f"memory limit of {limits.memory_bytes} bytes")
            if stopped_at is None and run.state.limit is not None:
                stopped_at = now
            if run.state.limit in _INJECTED_LIMITS and stopped_at is not None \
                    and now - stopped_at >= grace and now - last_injection >= _REINJECT_S:
                run.inject()
                last_injection = now
            if now >= hard:
                threading.Thread(target=self._reap, args=(run, worker), daemon=True,
                                 name="codemode-restricted-reaper").start()
                return True

    @staticmethod
    def _reap(run: _Run, worker: threading.Thread) -> None:
        until = time.monotonic() + _LATE_REAPER_S
        while worker.is_alive() and time.monotonic() < until:
            run.inject()
            worker.join(_REINJECT_S * 5)

    def _outcome(self, run: _Run, request: RunRequest, abandoned: bool) -> RunOutcome:
        duration = time.monotonic() - run.started
        ended: GuestOutcome | AnyRunError
        if abandoned:
            run.trip_time_up()
            ended = TimeLimitExceeded(
                message=f"{run.state.limit_message}; the worker thread could not be stopped "
                        "and was left running")
        else:
            data: dict[str, Any] = dict(run.result or {
                "status": "error", "error": {"type": "RuntimeError", "traceback": "",
                                             "message": "the run ended without a result"}})
            runtime.apply_limit(data, run.state)
            ended = decode_guest(runtime.encode_outcome(data, request.limits.result_bytes))
        return outcome(run, ended, duration_s=duration)
