"""Tool bindings: each exposed tool as an ordinary Python function (DESIGN.md §3, §4).

Called in synchronous code, a binding sends one sub-call and returns its value. In async
code, a call the program awaits or hands to asyncio (`await`, `gather`, `create_task`, ...;
see `callsite.py`) returns a coroutine, and every call pending when all tasks are waiting
goes to the host as one `dispatch` batch (see `aio.py`); any other call in async code
returns its value, as a plain function would. A failed call raises a binding rejection
(`errors.py`).

Arguments are checked here before anything is dispatched: the call's shape (names, required
parameters, positional vs keyword, like Python's own `TypeError`s) against the tool's
parameter list, and JSON-representability (no sets, bytes, NaN, cycles or objects). Types
against the schema are the host pipeline's job: one source of truth.
"""

import json
import math
import re
import sys

from .errors import rejection

# Deeper nesting than this is refused before encoding: json.dumps recurses in C, and deep
# native recursion would exhaust the wasm stack.
MAX_NESTING = 500

_NO_DEFAULT = object()


async def _settled(future):
    """The coroutine a tool call made inside async code returns: awaiting it yields to the
    loop until the host answers. A real coroutine, so `create_task`, `TaskGroup` and
    `gather` accept it; the call itself is already queued and is sent either way."""
    return await future


class Call:
    """One sub-call request: tool name, arguments (already JSON text), submission id, and
    for a call that did not fit the tool's signature, why not (`invalid`)."""

    __slots__ = ("id", "name", "alias", "args_json", "invalid")

    def __init__(self, call_id, name, alias, args_json, invalid=None):
        self.id = call_id
        self.name = name
        self.alias = alias
        self.args_json = args_json
        self.invalid = invalid


class Bridge:
    """Turns binding calls into dispatch batches and outcomes into values or rejections.

    Wire (JSON text through the WIT `dispatch` import), per batch:
    request `{"calls": [{"id", "name", "args"}], "cancel": [id], "wait_s": float | null,
    "until": [id] | null}`; the host starts the new calls, aborts the cancelled ones, and
    answers once one of `until` (default: any call in flight) has settled or `wait_s`
    passed: `{"results": [{"id", "ok": true, "value"} | {"id", "ok": false, "code",
    "message"}]}` with every call that settled since the last answer.
    """

    def __init__(self, dispatch, limits):
        self._dispatch = dispatch
        self._max_request_bytes = int(limits.get("request_bytes", 16 * 2**20))
        self._next_id = 0
        self._queued = []          # async calls not yet sent: (Call, future)
        self._in_flight = {}       # id -> (Call, future | None) sent, not yet settled
        self.callsites = None      # callsite.CallSites of the program, once compiled
        self._cancel_sent = set()  # ids whose cancellation the host was told
        self._settled = {}         # id -> outcome that arrived for a sync wait

    @property
    def idle(self):
        """True when no call is queued and no task waits on a call in flight (a call whose
        task was cancelled is only told to the host, never waited for)."""
        if any(not f.cancelled() for _, f in self._queued):
            return False
        if any(f is not None and not f.cancelled() for _, f in self._in_flight.values()):
            return False
        self._tell_cancelled()
        return True

    def _tell_cancelled(self):
        """Send the host the cancellations it has not heard of, without waiting."""
        self._queued = [(c, f) for c, f in self._queued if not f.cancelled()]
        if any(i not in self._cancel_sent for i, (_, f) in self._in_flight.items()
               if f is not None and f.cancelled()):
            self.exchange([], wait_s=0, until=None)

    def _number(self, name, alias, args):
        """Check JSON-ness and size, then give the call the next id. The per-run budget is
        the host's to enforce: a call past it ends the run there, which the program cannot
        catch (an error raised here could be)."""
        args_json = encode_args(alias, args)
        if len(args_json) > self._max_request_bytes:
            raise ValueError(
                f"arguments of {alias}(...) are {len(args_json)} bytes of JSON, over the "
                f"sandbox's limit of {self._max_request_bytes} bytes per sub-call"
            )
        self._next_id += 1
        return Call(self._next_id, name, alias, args_json)

    def call_sync(self, name, alias, args, invalid=None):
        call = self._number(name, alias, args)
        call.invalid = invalid
        self._in_flight[call.id] = (call, None)
        self.exchange([call], wait_s=None, until=[call.id])
        while call.id not in self._settled:
            self.exchange([], wait_s=None, until=[call.id])
        return unwrap(call, self._settled.pop(call.id))

    def call_async(self, loop, name, alias, args):
        call = self._number(name, alias, args)
        future = loop.create_future()
        self._queued.append((call, future))
        return _settled(future)

    def flush(self, wait_s):
        """Send queued calls and wait up to `wait_s` seconds (None: until one settles)."""
        queued, self._queued = self._queued, []
        new = []
        for call, future in queued:
            if not future.cancelled():
                self._in_flight[call.id] = (call, future)
                new.append(call)
        if new or self._in_flight:
            self.exchange(new, wait_s=wait_s, until=None)

    def exchange(self, calls, wait_s, until):
        cancel = [i for i, (_, f) in self._in_flight.items()
                  if f is not None and f.cancelled() and i not in self._cancel_sent]
        self._cancel_sent.update(cancel)
        request = '{"calls":[%s],"cancel":%s,"wait_s":%s,"until":%s}' % (
            ",".join('{"id":%d,"name":%s,"args":%s%s}' % (
                c.id, json.dumps(c.name), c.args_json,
                "" if c.invalid is None else ',"invalid":' + json.dumps(c.invalid))
                for c in calls),
            json.dumps(cancel), json.dumps(wait_s), json.dumps(until),
        )
        reply = json.loads(self._dispatch(request))
        for outcome in reply.get("results", ()):
            entry = self._in_flight.pop(outcome.get("id"), None)
            if entry is None:
                continue
            call, future = entry
            if future is None:
                self._settled[call.id] = outcome
            elif not future.cancelled():
                try:
                    future.set_result(unwrap(call, outcome))
                except BaseException as exc:  # a rejection travels to the awaiting task
                    future.set_exception(exc)

    def abandon(self):
        """Forget queued calls and cancel the futures of calls in flight (loop closing)."""
        for _, future in self._queued:
            future.cancel()
        self._queued = []
        for call_id, (_, future) in list(self._in_flight.items()):
            if future is not None:
                future.cancel()


def unwrap(call, outcome):
    if outcome.get("ok") is True:
        return outcome.get("value")
    raise rejection(call.name, outcome.get("code") or "TOOL_ERROR",
                    outcome.get("message") or "tool call failed")


_SCALARS = (str, int, float, bool, type(None))


def encode_args(alias, args):
    """JSON text of `args`, or a TypeError naming what is not a JSON value.

    Strict where `json.dumps` is lenient: only dict (string keys), list, str, int, float
    (finite), bool and None, exact types; tuples, sets, bytes, non-string keys, cycles and
    other objects are refused. The walk is iterative, so deep nesting cannot overflow it.
    """
    stack = [(args, "arguments", None)]
    active = set()     # ids of the containers on the current path: a repeat is a cycle
    while stack:
        value, parent, key = stack.pop()
        if value is _EXIT:
            active.discard(parent)
            continue
        kind = type(value)
        if kind in _SCALARS:
            problem = _scalar_problem(kind, value)
            if problem:
                raise TypeError(f"{alias}(): {_path(parent, key)} {problem}")
            continue
        if kind is dict or kind is list:
            where = _path(parent, key)
            if len(active) >= MAX_NESTING:
                raise TypeError(f"{alias}(): arguments are nested more than {MAX_NESTING} "
                                "levels deep, too deep to send")
            if id(value) in active:
                raise TypeError(f"{alias}(): {where} contains itself (a cycle), "
                                "which JSON cannot express")
            active.add(id(value))
            stack.append((_EXIT, id(value), None))
            if kind is dict:
                for k, item in value.items():
                    if type(k) is not str:
                        raise TypeError(f"{alias}(): {where} has a key {k!r} of type "
                                        f"{type(k).__name__}; JSON object keys must be str")
                    if _SURROGATE.search(k):
                        raise TypeError(f"{alias}(): {where} has a key with an unpaired "
                                        "surrogate, which is not valid Unicode text")
                    stack.append((item, where, k))
            else:
                stack.extend((item, where, i) for i, item in enumerate(value))
            continue
        raise TypeError(
            f"{alias}(): {_path(parent, key)} is a {kind.__name__}, which is not a JSON value "
            "(use dict, list, str, int, float, bool or None)")
    try:
        return json.dumps(args, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:
        raise TypeError(f"{alias}(): arguments are nested too deeply to be sent") from None
    except ValueError as exc:  # e.g. an int too large to convert to text
        raise TypeError(f"{alias}(): arguments cannot be sent as JSON: {exc}") from None


_SURROGATE = re.compile("[\ud800-\udfff]")
_INT_RANGE = (-(2**63), 2**63)


def _scalar_problem(kind, value):
    """Why a str/int/float scalar cannot be sent losslessly, or None. The host refuses the
    same values (PIPELINE.md §1.1); refusing them here makes them a TypeError before
    anything is dispatched."""
    if kind is float:
        if value != value or value in (_INF, -_INF):
            return f"is {value!r}, which is not a JSON value"
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return "is -0.0, which JSON does not keep apart from 0"
    elif kind is int:
        if not _INT_RANGE[0] <= value < _INT_RANGE[1]:
            return "is an int outside the 64-bit range JSON tools accept"
    elif kind is str and _SURROGATE.search(value):
        return "contains an unpaired surrogate, which is not valid Unicode text"
    return None


def _path(parent, key):
    return parent if key is None else f"{parent}[{key!r}]"


_INF = float("inf")
_EXIT = object()


class Binding:
    """The function a program calls for one tool."""

    def __init__(self, bridge, spec, loop_getter):
        self._bridge = bridge
        self._loop_getter = loop_getter
        self.name = spec["name"]
        self.alias = spec["alias"]
        self._params = [
            (p["name"], bool(p.get("required")), p.get("default", _NO_DEFAULT))
            for p in spec.get("params", ())
        ]
        self._omit_if_none = frozenset(
            p["name"] for p in spec.get("params", ()) if p.get("omit_if_none"))
        self._accepts_extra = bool(spec.get("accepts_extra", True))
        self.__name__ = self.__qualname__ = self.alias
        self.__doc__ = spec.get("doc") or None

    def __repr__(self):
        return f"<tool {self.alias}>"

    def _bind(self, args, kwargs):
        """Map positional and keyword arguments onto parameter names, like Python does."""
        alias = self.alias
        names = [n for n, _, _ in self._params]
        if len(args) > len(names):
            raise TypeError(
                f"{alias}() takes {len(names)} positional argument"
                f"{'' if len(names) == 1 else 's'} but {len(args)} were given"
            )
        bound = dict(zip(names, args))
        for key, value in kwargs.items():
            if key in bound:
                raise TypeError(f"{alias}() got multiple values for argument '{key}'")
            if key not in names and not self._accepts_extra:
                raise TypeError(f"{alias}() got an unexpected keyword argument '{key}'")
            bound[key] = value
        missing = [n for n, required, _ in self._params if required and n not in bound]
        if missing:
            quoted = " and ".join(f"'{m}'" for m in missing) if len(missing) <= 2 else \
                ", ".join(f"'{m}'" for m in missing[:-1]) + f", and '{missing[-1]}'"
            raise TypeError(
                f"{alias}() missing {len(missing)} required argument"
                f"{'' if len(missing) == 1 else 's'}: {quoted}"
            )
        return bound

    def __call__(self, *args, **kwargs):
        try:
            bound = self._bind(args, kwargs)
        except TypeError as exc:
            # A call of the wrong shape is still a call: the host records the attempt, runs
            # it through policy and answers INVALID_ARGS (raised as ToolArgumentError, a
            # TypeError), unless the attempt is not even JSON (a TypeError, nothing sent).
            attempt = dict(zip((n for n, _, _ in self._params), args))
            for key, value in kwargs.items():
                attempt.setdefault(key, value)
            return self._bridge.call_sync(self.name, self.alias, attempt, invalid=str(exc))
        for key in self._omit_if_none:
            if key in bound and bound[key] is None:
                del bound[key]
        loop = self._loop_getter()
        sites = self._bridge.callsites
        if loop is not None and (sites is None
                                 or sites.wants_awaitable(sys._getframe(1)) is not False):
            return self._bridge.call_async(loop, self.name, self.alias, bound)
        return self._bridge.call_sync(self.name, self.alias, bound)


class ToolNamespace:
    """`tools.<alias>` access to every binding; read-only."""

    def __init__(self, bindings):
        object.__setattr__(self, "_bindings", dict(bindings))

    def __getattr__(self, alias):
        try:
            return self._bindings[alias]
        except KeyError:
            raise AttributeError(f"no tool named {alias!r} is available") from None

    def __setattr__(self, key, value):
        raise AttributeError("the tools namespace is read-only")

    def __dir__(self):
        return sorted(self._bindings)

    def __repr__(self):
        return f"<tools: {', '.join(sorted(self._bindings))}>"
