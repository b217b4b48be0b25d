"""Runs one program inside the component and reports how it ended (docs/design.md §3).

`run(request_text, dispatch, sleep) -> outcome_text`, both JSON. The outcome:
`{"status": "ok" | "error" | "limit", "value"?, "error"?: {"type", "message", "traceback"},
"limit"?: name}`; `value` is in the lossless encoding of `values.py`. stdout and stderr are
not in it: they leave as they are written (`output.py`), through WASI's stdout and stderr.
Every exception the program raises, BaseException included, becomes a structured error
whose traceback lists only the program's own lines; nothing escapes as a trap.
"""

import ast
import builtins
import json
import linecache
import os
import re
import sys
import traceback

from . import aio, callsite, introspect, modules, output, profile, settling
from .errors import ToolArgumentError, ToolCallError, ToolDenied, ToolError, ToolNotFound
from .output import CappedSink, text_stream
from .pending import contains, isinstance_, settle
from .tools import Binding, Bridge, ToolNamespace
from .values import MAX_DEPTH as MAX_VALUE_DEPTH
from .values import ValueTooLarge
from .values import encode as encode_value

PROGRAM_FILENAME = "<program>"
MAX_MESSAGE_CHARS = 8192
VALUE_SLOT = "__codemode_value__"

NOT_AVAILABLE = " (not available in the sandbox)"


# Everything a program created stays referenced until the instance is discarded: freeing
# a deeply nested structure recurses natively and could exhaust the wasm stack, and
# nothing needs freeing in an instance that runs one program.
_RETAINED = []


def forget_runs():
    """Drop what earlier runs left behind (used after the snapshot's warm-up run)."""
    _RETAINED.clear()
    linecache.cache.pop(PROGRAM_FILENAME, None)
    aio.install(None, None)


class RunState:
    """What the runtime learns during a run that decides its status."""

    def __init__(self):
        self.limit = None
        self.limit_message = None

    def trip(self, limit, message):
        if self.limit is None:
            self.limit, self.limit_message = limit, message


def _unavailable(name):
    """The first dotted prefix of `name` that is not on the list (CPython also names the
    missing package, not the submodule asked for), or None."""
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        if prefix not in modules.IMPORTABLE:
            return prefix
    return None


def _not_found(name):
    return ModuleNotFoundError(f"No module named {name!r}{NOT_AVAILABLE}", name=name)


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    """The program's `__import__`: modules on the list only (`modules.txt`). C code the
    program calls imports through it too (`datetime.strptime` imports `_strptime`), which
    is why private modules are on the list. CPython's own ImportError text is kept; the
    sandbox's reason is appended."""
    if level == 0:
        missing = _unavailable(name)
        if missing is not None:
            raise _not_found(missing)
    try:
        module = builtins.__import__(name, globals, locals, fromlist, level)
    except ImportError as exc:
        if level:                 # "attempted relative import with no known parent package"
            _append(exc, " (a sandboxed program is not part of a package)")
        raise
    for item in fromlist or ():
        sub = getattr(module, item, None)
        if type(sub) is type(sys) and sub.__name__ not in modules.IMPORTABLE:
            raise _not_found(sub.__name__)
    return module


def _append(exc, text):
    message = f"{exc.msg}{text}"
    exc.msg = message
    exc.args = (message, *exc.args[1:])


def install_import_guard():
    """Make `importlib.import_module` keep to the same list as `import` (called once, after
    every module on the list was imported)."""
    import importlib
    import importlib.util

    real = importlib.import_module

    def import_module(name, package=None):
        absolute = importlib.util.resolve_name(name, package) if name.startswith(".") \
            else name
        missing = _unavailable(absolute)
        if missing is not None:
            raise _not_found(missing)
        return real(name, package)

    import_module.__doc__ = real.__doc__
    importlib.import_module = import_module


def _program_builtins():
    scope = dict(vars(builtins))
    scope["__import__"] = _guarded_import
    scope["isinstance"] = isinstance_
    scope["print"] = output.print
    scope[settling.SETTLE_NAME] = settle
    scope[settling.CONTAINS_NAME] = contains
    return scope


def _compile(source):
    """Compile with top-level await; the last expression statement's value goes to a slot.
    The call sites are analysed only when the program may run an event loop (`callsite`:
    without one every tool call returns its value, whatever the analysis would say), and
    then identity, membership and `type(x)` are made to wait for a pending call
    (`settling`)."""
    tree = ast.parse(source, PROGRAM_FILENAME, "exec")
    sites = None
    if callsite.may_run_a_loop(source):
        sites = callsite.analyse(tree)
        settling.settle_identity(tree)
    has_value = bool(tree.body) and isinstance(tree.body[-1], ast.Expr)
    if has_value:
        last = tree.body[-1]
        slot = ast.copy_location(ast.Name(VALUE_SLOT, ast.Store()), last)
        # The only new nodes, both placed where the expression was: no tree-wide
        # `fix_missing_locations` (a third of a small program's compile time).
        tree.body[-1] = ast.copy_location(ast.Assign(targets=[slot], value=last.value), last)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    return (compile(tree, PROGRAM_FILENAME, "exec", flags=flags, dont_inherit=True), has_value,
            sites)


MAX_TRACEBACK_CHARS = 64 * 1024


def _program_traceback(exc):
    """`traceback.TracebackException` of `exc` (its chain, notes and group members
    included) with every stack cut down to the program's own frames. Built from the real
    traceback, so CPython's suggestions ("Did you mean: 'append'?", "Did you forget to
    import 'sys'?") are computed as CPython computes them."""
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True,
                                      max_group_width=15, max_group_depth=10)
    seen = set()
    pending = [te]
    while pending:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        item.stack = traceback.StackSummary.from_list(
            [f for f in item.stack if f.filename == PROGRAM_FILENAME])
        pending.extend(x for x in (item.__cause__, item.__context__) if x is not None)
        pending.extend(getattr(item, "exceptions", None) or ())
    return te


def _message(exc, te):
    """The exception's own line as CPython prints it, without the type (suggestions kept),
    cut to MAX_MESSAGE_CHARS; SystemExit and a bare KeyboardInterrupt named plainly."""
    if isinstance(exc, SystemExit):
        return f"the program called sys.exit({exc.code!r})"
    if isinstance(exc, KeyboardInterrupt) and not exc.args:
        return "KeyboardInterrupt"
    if isinstance(exc, SyntaxError):
        try:
            text = str(exc)
        except BaseException:
            text = "invalid syntax"
    else:
        text = getattr(te, "_str", None)
        if not isinstance(text, str):
            text = "<exception str() failed>"
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + f"... [{len(text) - MAX_MESSAGE_CHARS} more characters]"
    return text


def _cut(text, limit):
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def _error(exc):
    """{"type", "message", "traceback"} of an exception the program let escape: the
    traceback is CPython's own text (chained exceptions, notes, exception groups, a
    SyntaxError's source line and caret), showing only `<program>` frames."""
    try:
        te = _program_traceback(exc)
        text = "".join(te.format())
    except RecursionError:       # a chain or group too deep to walk
        te, text = None, f"{type(exc).__qualname__}: (too deeply nested to show)\n"
    return {"type": type(exc).__qualname__, "message": _message(exc, te),
            "traceback": _cut(text, MAX_TRACEBACK_CHARS)}


def fd_writer(fd):
    """`emit` for a CappedSink: every byte to the WASI file descriptor `fd` (1 or 2)."""
    def emit(data):
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    return emit


def finish_value(outcome, state, value, limit_bytes):
    """Put the final value's JSON text in `outcome["value"]` (None too: a final expression
    of None keeps `null`), or trip the output limit when its JSON is over `limit_bytes`
    (the value is then left out). The encoder recurses about twice per level of nesting and
    cuts at `values.MAX_DEPTH` levels: the recursion limit is raised for it while it runs
    (Python frames, not the C stack), so a value as deep as CPython itself can build and
    show comes back, cut past that depth, instead of failing the run."""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, 4 * MAX_VALUE_DEPTH + 1000))
    try:
        outcome["value"] = encode_value(value, limit_bytes)
    except ValueTooLarge as exc:
        state.trip("output", str(exc))
    finally:
        sys.setrecursionlimit(previous)


# The rejection classes are globals of every program, like builtins: tracebacks name them
# `ToolDenied: ...`, not `cm_guest.errors.ToolDenied: ...`.
for _cls in (ToolCallError, ToolDenied, ToolArgumentError, ToolNotFound, ToolError):
    _cls.__module__ = "builtins"



class Prepared:
    """What a run needs that its request does not decide, made before the request is known
    (`prepare`, in the snapshot and in the host's warm-up of an instance made ahead) or, when
    none was, at the run's start: the run's state, its two output streams, the bridge, and
    the program's globals but for its tools (builtins, `call_tool`, the rejection classes).
    In the host's warm-up the globals may hold the tools too, bound from the tool specs the
    host expects the run to have (`tools_bound`); for a run whose request has other tools,
    they are unbound again (`unbind_tools`). Each is made for one run and used by that run
    only (`take_prepared`): no program ever saw it before."""

    def __init__(self):
        self.state = RunState()
        self.out_sink = CappedSink(0, self.state, "stdout", None)
        self.err_sink = CappedSink(0, self.state, "stderr", None)
        self.stdout = text_stream(self.out_sink)
        self.stderr = text_stream(self.err_sink)
        self.bridge = Bridge(None, {})
        self.bindings = {}            # alias -> Binding, filled by `bind_tools`
        self.by_name = {}             # tool name -> Binding
        self.ns = _globals(self.bridge, self.bindings, self.by_name)
        self.tools_bound = False      # `ns` holds the tools of `prepare(tools)`
        self._unbound = None          # then: `ns` as it was before

    def bind_tools(self, tools):
        """The globals, for the program, with the request's tool bindings."""
        return _add_tools(self.ns, self.bridge, self.bindings, self.by_name, tools)

    def bind_tools_ahead(self, tools):
        """`bind_tools` before the run's request is known (`prepare`)."""
        self._unbound = dict(self.ns)
        self.bind_tools(tools)
        self.tools_bound = True

    def unbind_tools(self):
        """Undo `bind_tools_ahead`: the globals and the tables `call_tool` finds tools in
        as they were before it (binding a tool changes nothing else)."""
        self.ns.clear()
        self.ns.update(self._unbound)
        self.bindings.clear()
        self.by_name.clear()
        self.tools_bound = False


_prepared = None      # the next run's Prepared, when one was made ahead


def prepare(tools=None):
    """Make the next run's `Prepared` now (replacing one made before, unused); with `tools`
    (tool specs, as a request carries them), its globals hold their bindings already."""
    global _prepared
    _prepared = Prepared()
    if tools is not None:
        _prepared.bind_tools_ahead(tools)


def take_prepared():
    """The `Prepared` made ahead, once (the slot is emptied), else a new one."""
    global _prepared
    prepared, _prepared = _prepared, None
    return prepared if prepared is not None else Prepared()


def _globals(bridge, bindings, by_name, write=None):
    """The program's globals without its tools; `call_tool` and `help` find the tools in
    `bindings` (by alias) and `by_name`, filled later. `help` prints with `write` (default:
    the program's `sys.stdout`)."""

    def call_tool(name, /, **kwargs):
        """call_tool(name, /, **kwargs): call any tool by its name (the host decides
        which names exist)."""
        if type(name) is not str:
            raise TypeError(f"call_tool() name must be a str, not {type(name).__name__}")
        binding = by_name.get(name) or bindings.get(name)
        if binding is None:
            binding = Binding(bridge, {"name": name, "alias": "call_tool",
                                       "accepts_extra": True}, aio.running_sandbox_loop)
        return binding(**kwargs)

    # Python's own call errors name the function by its qualified name: make it the name
    # the program knows (`call_tool() takes 1 positional argument but 2 were given`).
    call_tool.__qualname__ = "call_tool"
    call_tool.__code__ = call_tool.__code__.replace(co_qualname="call_tool")

    return {
        "__name__": "__main__", "__doc__": None, "__package__": None, "__spec__": None,
        "__builtins__": _program_builtins(), "call_tool": call_tool,
        "ToolCallError": ToolCallError, "ToolDenied": ToolDenied,
        "ToolArgumentError": ToolArgumentError, "ToolNotFound": ToolNotFound,
        "ToolError": ToolError, "help": introspect.make_help(bindings, write),
    }


def _add_tools(ns, bridge, bindings, by_name, tools):
    """`ns` with a binding for each tool spec of `tools` (and `tools.<alias>`)."""
    for spec in tools:
        binding = Binding(bridge, spec, aio.running_sandbox_loop)
        bindings[binding.alias] = binding
        by_name[binding.name] = binding
    ns["tools"] = ToolNamespace(bindings)
    ns.update(bindings)
    return ns


def _namespace(bridge, tools, write=None):
    """The program's globals with its tool bindings on `bridge`, made now; `help` prints
    with `write`."""
    bindings, by_name = {}, {}
    return _add_tools(_globals(bridge, bindings, by_name, write), bridge, bindings, by_name,
                      tools)


def run(request_text, dispatch, sleep, writer=fd_writer):
    """Run the request's program; `writer(fd)` is where its stdout (1) and stderr (2) go."""
    prepared = take_prepared()
    request = json.loads(request_text)
    # The host says "tools_prepared" only for an instance it prepared with this run's tools.
    tools_prepared = request.get("tools_prepared") is True
    if prepared.tools_bound and not tools_prepared:
        prepared.unbind_tools()       # bound ahead to other tools: none of them is this run's
    limits = request.get("limits", {})
    state = prepared.state
    output_bytes = int(limits.get("output_bytes", 1 << 20))
    prepared.out_sink.bind(output_bytes, writer(1))
    prepared.err_sink.bind(output_bytes, writer(2))
    sys.stdout, sys.stderr = prepared.stdout, prepared.stderr
    bridge = prepared.bridge
    bridge.bind(dispatch, limits)
    aio.install(bridge, sleep)
    source = request.get("code", "")
    linecache.cache[PROGRAM_FILENAME] = (len(source), None, source.splitlines(True),
                                         PROGRAM_FILENAME)
    outcome = {"status": "ok"}
    # No clock is read unless asked: a recorded run's tape holds every read.
    timers = profile.Profile(bridge) if request.get("profile") is True else profile.OFF
    try:
        code, has_value, bridge.callsites = _compile(source)
        timers.mark("compile")
        if not tools_prepared:
            ns = prepared.bind_tools(request.get("tools", ()))
        elif prepared.tools_bound:
            ns = prepared.ns
        else:
            raise RuntimeError("the host sent no tools, and none were bound ahead")
        timers.mark("namespace")
        _RETAINED.append(ns)
        if code.co_flags & 0x80:       # CO_COROUTINE: top-level await
            coroutine = eval(code, ns)
            import asyncio
            asyncio.run(coroutine)
        else:
            exec(code, ns)
        value = bridge.finish(ns.get(VALUE_SLOT))
        _warn_unused(bridge, sys.stderr)
        if has_value:
            finish_value(outcome, state, value, output_bytes)
    except BaseException as exc:
        _RETAINED.append(exc)
        outcome = {"status": "error", "error": _error(exc)}
        if isinstance(exc, MemoryError):
            state.trip("memory", memory_message(limits))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    timers.mark("program")
    timers.stop(outcome)
    apply_limit(outcome, state)
    return encode_outcome(outcome, int(limits.get("result_bytes", 64 << 20)))


def _warn_unused(bridge, stream):
    """Say on `stream` (the program's stderr) which tool calls the program made in async
    code and never used (`Bridge.unused_note`): they ran, but nothing read their values."""
    note = bridge.unused_note()
    if note:
        try:
            stream.write(note)
        except BaseException:      # stderr at its limit: the limit is what the run reports
            pass


def memory_message(limits):
    """The memory limit's message: `limits` is the run request's `limits` (bytes)."""
    limit = limits.get("memory_bytes")
    if limit is None:
        return "the program ran out of its memory limit"
    limit = int(limit)
    mib = f" ({limit >> 20} MiB)" if limit % (1 << 20) == 0 else ""   # as --memory-mb says it
    return f"the program ran out of its memory limit of {limit} bytes{mib}"


def apply_limit(outcome, state):
    """A limit that fired decides the status, whatever the program did after it."""
    if state.limit is not None:
        outcome.pop("value", None)
        outcome["status"] = "limit"
        outcome["limit"] = state.limit
        outcome.setdefault("error", {"type": "LimitReached", "message": state.limit_message,
                                     "traceback": ""})
        outcome["error"]["message"] = state.limit_message


_SURROGATE = re.compile("[\ud800-\udfff]")


def _dumps(outcome):
    """JSON text that is valid Unicode: an unpaired surrogate (which `print` escapes but a
    value or message may hold) becomes U+FFFD rather than failing the string's way out."""
    return _SURROGATE.sub("\ufffd", json.dumps(outcome, ensure_ascii=False))


def encode_outcome(outcome, result_bytes):
    """The outcome as JSON text; `outcome["value"]`, if any, is already JSON text and is
    spliced in. Over `result_bytes`, the value is dropped and the run ends at the output
    limit."""
    value = outcome.pop("value", None)
    text = _dumps(outcome)
    if value is not None:
        if len(text) + len(value) + 10 <= result_bytes:
            return '{"value":%s,%s' % (value, text[1:])
        outcome["status"] = "limit"
        outcome["limit"] = "output"
        outcome["error"] = {"type": "LimitReached", "traceback": "",
                            "message": f"the run's result is over the limit of "
                                       f"{result_bytes} bytes"}
        text = _dumps(outcome)
    return text
