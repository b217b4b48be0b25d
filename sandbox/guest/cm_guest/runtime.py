"""Runs one program inside the component and reports how it ended (DESIGN.md §3).

`run(request_text, dispatch, sleep) -> outcome_text`, both JSON. The outcome:
`{"status": "ok" | "error" | "limit", "stdout", "stderr", "value"?, "value_repr"?,
"error"?: {"type", "message", "traceback"}, "limit"?: name}`. Every exception the program
raises, BaseException included, becomes a structured error whose traceback lists only the
program's own lines; nothing escapes as a trap.
"""

import ast
import builtins
import json
import linecache
import re
import sys
import traceback

from . import aio, callsite
from .errors import ToolArgumentError, ToolCallError, ToolDenied, ToolError, ToolNotFound
from .output import CappedSink, text_stream
from .tools import Binding, Bridge, ToolNamespace

PROGRAM_FILENAME = "<program>"
MAX_MESSAGE_CHARS = 8192
VALUE_SLOT = "__codemode_value__"

# Modules a program may import: the curated, preloaded standard-library set (docs/sandbox.md).
ALLOWED_MODULES = frozenset("""
    abc array asyncio base64 binascii bisect calendar collections collections.abc contextlib
    copy csv dataclasses datetime decimal difflib enum fractions functools hashlib heapq html
    io itertools json math numbers operator os os.path pprint random re secrets statistics
    string struct sys textwrap time types typing unicodedata urllib urllib.parse uuid
    warnings weakref zlib
""".split())


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


# Private modules the allowed ones import lazily from C (datetime.strptime -> _strptime);
# C-level imports go through the same `__import__` as the program's own.
_IMPLICIT_MODULES = frozenset({"_strptime", "encodings", "encodings.idna", "_pydatetime",
                               "_pydecimal", "_colorize"})


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level != 0:
        raise ImportError("relative imports are not available in the sandbox")
    if name not in ALLOWED_MODULES and name not in _IMPLICIT_MODULES:
        raise ModuleNotFoundError(
            f"module {name!r} is not available in the sandbox (see docs/sandbox.md for the "
            "modules that are)", name=name)
    module = builtins.__import__(name, globals, locals, fromlist, level)
    for item in fromlist or ():
        sub = getattr(module, item, None)
        if type(sub) is type(sys) and sub.__name__ not in ALLOWED_MODULES:
            raise ModuleNotFoundError(
                f"module {sub.__name__!r} is not available in the sandbox", name=sub.__name__)
    return module


def _program_builtins():
    scope = dict(vars(builtins))
    scope["__import__"] = _guarded_import
    return scope


def _compile(source):
    """Compile with top-level await; the last expression statement's value goes to a slot."""
    tree = ast.parse(source, PROGRAM_FILENAME, "exec")
    sites = callsite.analyse(tree)
    has_value = bool(tree.body) and isinstance(tree.body[-1], ast.Expr)
    if has_value:
        last = tree.body[-1]
        tree.body[-1] = ast.copy_location(
            ast.Assign(targets=[ast.Name(VALUE_SLOT, ast.Store())], value=last.value), last)
        ast.fix_missing_locations(tree)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    return (compile(tree, PROGRAM_FILENAME, "exec", flags=flags, dont_inherit=True), has_value,
            sites)


def _message(exc):
    if isinstance(exc, SystemExit):
        return f"the program called sys.exit({exc.code!r})"
    if isinstance(exc, KeyboardInterrupt) and not exc.args:
        return "KeyboardInterrupt"
    try:
        text = str(exc)
    except BaseException:
        text = f"<unprintable {type(exc).__name__} object>"
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + f"... [{len(text) - MAX_MESSAGE_CHARS} more characters]"
    return text


def _program_frames(tb):
    frames = [f for f in traceback.extract_tb(tb) if f.filename == PROGRAM_FILENAME]
    return "".join(traceback.StackSummary.from_list(frames).format())


def _format_traceback(exc):
    """Python's traceback layout, keeping only frames of the program's own source."""
    chain, seen = [], set()
    current = exc
    while current is not None and id(current) not in seen and len(chain) < 10:
        seen.add(id(current))
        chain.append(current)
        if current.__cause__ is not None:
            current = current.__cause__
        elif current.__context__ is not None and not current.__suppress_context__:
            current = current.__context__
        else:
            current = None
    parts = []
    for i, item in enumerate(reversed(chain)):
        if i:
            later = chain[len(chain) - i - 1]
            parts.append("\nThe above exception was the direct cause of the following "
                         "exception:\n\n" if later.__cause__ is item else
                         "\nDuring handling of the above exception, another exception "
                         "occurred:\n\n")
        frames = _program_frames(item.__traceback__)
        if frames:
            parts.append("Traceback (most recent call last):\n" + frames)
        parts.append(_exception_line(item))
    return "".join(parts)


def _exception_line(exc):
    name = type(exc).__qualname__
    if isinstance(exc, SyntaxError) and exc.filename == PROGRAM_FILENAME:
        body = "".join(traceback.format_exception_only(type(exc), exc))
        return body if len(body) < MAX_MESSAGE_CHARS else body[:MAX_MESSAGE_CHARS] + "\n"
    message = _message(exc)
    return f"{name}: {message}\n" if message else f"{name}\n"


def _error(exc):
    return {"type": type(exc).__qualname__, "message": _message(exc),
            "traceback": _format_traceback(exc)}


def _encode_value(value):
    try:
        return {"value": json.loads(json.dumps(value, allow_nan=False))}
    except BaseException:
        try:
            text = repr(value)
        except BaseException:
            text = f"<unprintable {type(value).__name__} object>"
        return {"value": text[:MAX_MESSAGE_CHARS], "value_repr": True}


def _namespace(bridge, tools):
    bindings = {}
    by_name = {}
    for spec in tools:
        binding = Binding(bridge, spec, aio.running_sandbox_loop)
        bindings[binding.alias] = binding
        by_name[binding.name] = binding

    def call_tool(name, /, **kwargs):
        """Call any tool by its name (the host decides which names exist)."""
        if type(name) is not str:
            raise TypeError(f"call_tool() name must be a str, not {type(name).__name__}")
        binding = by_name.get(name) or bindings.get(name)
        if binding is None:
            binding = Binding(bridge, {"name": name, "alias": "call_tool",
                                       "accepts_extra": True}, aio.running_sandbox_loop)
        return binding(**kwargs)

    ns = {
        "__name__": "__main__", "__doc__": None, "__builtins__": _program_builtins(),
        "tools": ToolNamespace(bindings), "call_tool": call_tool,
        "ToolCallError": ToolCallError, "ToolDenied": ToolDenied,
        "ToolArgumentError": ToolArgumentError, "ToolNotFound": ToolNotFound,
        "ToolError": ToolError,
    }
    ns.update(bindings)
    return ns


def run(request_text, dispatch, sleep):
    request = json.loads(request_text)
    limits = request.get("limits", {})
    state = RunState()
    output_bytes = int(limits.get("output_bytes", 1 << 20))
    out_sink = CappedSink(output_bytes, state, "stdout")
    err_sink = CappedSink(output_bytes, state, "stderr")
    sys.stdout = text_stream(out_sink)
    sys.stderr = text_stream(err_sink)
    bridge = Bridge(dispatch, limits)
    aio.install(bridge, sleep)
    source = request.get("code", "")
    linecache.cache[PROGRAM_FILENAME] = (len(source), None, source.splitlines(True),
                                         PROGRAM_FILENAME)
    outcome = {"status": "ok"}
    try:
        code, has_value, bridge.callsites = _compile(source)
        ns = _namespace(bridge, request.get("tools", ()))
        _RETAINED.append(ns)
        if code.co_flags & 0x80:       # CO_COROUTINE: top-level await
            coroutine = eval(code, ns)
            import asyncio
            asyncio.run(coroutine)
        else:
            exec(code, ns)
        if has_value:                  # None too: a final expression of None keeps `null`
            outcome.update(_encode_value(ns.get(VALUE_SLOT)))
    except BaseException as exc:
        _RETAINED.append(exc)
        outcome = {"status": "error", "error": _error(exc)}
        if isinstance(exc, MemoryError):
            state.trip("memory", "the program ran out of its memory limit")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    if state.limit is not None:
        outcome["status"] = "limit"
        outcome["limit"] = state.limit
        outcome.setdefault("error", {"type": "LimitReached", "message": state.limit_message,
                                     "traceback": ""})
        outcome["error"]["message"] = state.limit_message
    outcome["stdout"] = out_sink.text()
    outcome["stderr"] = err_sink.text()
    return _encode_outcome(outcome, int(limits.get("result_bytes", 64 << 20)))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _dumps(outcome):
    """JSON text that is valid Unicode: an unpaired surrogate (which `print` escapes but a
    value or message may hold) becomes U+FFFD rather than failing the string's way out."""
    return _SURROGATE.sub("\ufffd", json.dumps(outcome, ensure_ascii=False))


def _encode_outcome(outcome, result_bytes):
    text = _dumps(outcome)
    if len(text) > result_bytes:
        outcome.pop("value", None)
        outcome.pop("value_repr", None)
        outcome["status"] = "limit"
        outcome["limit"] = "output"
        outcome["error"] = {"type": "LimitReached", "traceback": "",
                            "message": f"the run's result is {len(text)} bytes, over the "
                                       f"limit of {result_bytes} bytes"}
        text = _dumps(outcome)
        if len(text) > result_bytes:
            outcome["stdout"] = outcome["stdout"][: result_bytes // 4]
            outcome["stderr"] = outcome["stderr"][: result_bytes // 4]
            text = _dumps(outcome)
    return text
