"""Tool bindings: each exposed tool as an ordinary Python function (docs/design.md §3, §4).

A binding returns the tool's value, except in async code at a call site whose result may
reach asyncio (`callsite.py`): there it returns a `PendingCall` (`pending.py`), which is
awaitable and also behaves as the value wherever it is used as one. Pending calls are
queued and go to the host together, as one `dispatch` batch, when every task waits (see
`aio.py`), when any call's value is needed, or when the program ends. A failed call raises
a binding rejection (`errors.py`).

Arguments are checked here before anything is dispatched: the call's shape (names, required
parameters, positional vs keyword, like Python's own `TypeError`s) against the tool's
parameter list, and JSON-representability (no sets, bytes, NaN, cycles or objects). Types
against the schema are the host pipeline's job: one source of truth.
"""

import json
import math
import re
import sys
from asyncio.events import _get_running_loop

from . import introspect, signature
from .errors import rejection
from .pending import PendingCall, json_default, settle_nested

# Deeper nesting than this is refused before encoding: json.dumps recurses in C, and deep
# native recursion would exhaust the wasm stack.
MAX_NESTING = 500


class Bridge:
    """Turns binding calls into dispatch batches and outcomes into values or rejections.

    Every call is a `PendingCall`, numbered in the order the program makes them and queued;
    a plain call waits for its own at once. A batch sends every queued call, in that order,
    so the host starts them in submission order.

    Wire (JSON text through the WIT `dispatch` import), per batch:
    request `{"calls": [{"id", "name", "args"}], "cancel": [id], "wait_s": float | null,
    "until": [id] | null}` (`cancel` and `wait_s` may be left out: [] and null); the host
    starts the new calls, aborts the cancelled ones, and answers once one of `until` has
    settled or `wait_s` passed (`until: []`: at once):
    `{"results": [{"id", "ok": true, "value"} | {"id", "ok": false, "code", "message"}]}`
    with every call that settled since the last answer.
    """

    def __init__(self, dispatch, limits):
        self.bind(dispatch, limits)
        self._next_id = 0
        self._queued = []          # PendingCalls not yet sent, in submission order
        self._in_flight = {}       # id -> PendingCall sent, not yet settled
        self._cancel = []          # ids of calls in flight the host must abort, not yet sent
        self._made = []            # every PendingCall of the run, for `unused_note`
        self.callsites = None      # callsite.CallSites of the program, once compiled

    def bind(self, dispatch, limits):
        """Set the host's `dispatch` and the run's limits (a bridge made before its run's
        request was known)."""
        self._dispatch = dispatch
        self._max_request_bytes = int(limits.get("request_bytes", 16 * 2**20))

    # ---- making calls -------------------------------------------------------------------

    def submit(self, name, alias, args, invalid=None, line=None):
        """Check the arguments (JSON-ness, size), number the call and queue it. The per-run
        budget is the host's to enforce: a call past it ends the run there, which the
        program cannot catch (an error raised here could be). `invalid`: why the call does
        not fit the tool's signature (the host records the attempt, answers INVALID_ARGS)."""
        args_json = encode_args(alias, args)
        if len(args_json) > self._max_request_bytes:
            raise self._too_large(alias, args_json)
        self._next_id += 1
        call = PendingCall(self, self._next_id, name, alias, args_json, line)
        call._invalid = invalid
        self._queued.append(call)
        if line is not None:
            self._made.append(call)
        return call

    def call(self, name, alias, args, invalid=None, name_json=None):
        """A plain call: its value (every call queued before it goes in the same batch).
        `name_json`: `name` as JSON text, when the caller made it ahead."""
        if invalid is not None or self._queued or self._in_flight or self._cancel:
            return self.submit(name, alias, args, invalid)._value()
        # Nothing else is queued, in flight or to cancel (synchronous code): a batch of this
        # one call, with no PendingCall made for it.
        args_json = encode_args(alias, args)
        if len(args_json) > self._max_request_bytes:
            raise self._too_large(alias, args_json)
        self._next_id = call_id = self._next_id + 1
        # A batch of this one call, nothing to cancel (`cancel` and `wait_s` left out: [] and
        # null), answered once it settled. An f-string: a third cheaper than `%` formatting
        # in the guest.
        text = self._dispatch(
            f'{{"calls":[{{"id":{call_id},"name":{name_json or json.dumps(name)},'
            f'"args":{args_json}}}],"until":[{call_id}]}}')
        value = _ok_value(text, call_id)
        if value is not _NOT_OK:
            return value
        reply = _decode_reply(text)
        mine = None
        for outcome in reply.get("results", ()):
            if mine is None and outcome.get("id") == call_id:
                mine = outcome
        if mine is None:      # not settled in this answer: wait for it as for any call
            call = PendingCall(self, call_id, name, alias, args_json)
            self._in_flight[call_id] = call
            return call._value()
        if mine.get("ok") is True:
            return mine.get("value")
        raise rejection(name, mine.get("code") or "TOOL_ERROR",
                        mine.get("message") or "tool call failed")

    def _too_large(self, alias, args_json):
        return ValueError(
            f"arguments of {alias}(...) are {len(args_json)} bytes of JSON, over the "
            f"sandbox's limit of {self._max_request_bytes} bytes per sub-call")

    def resolve(self, call):
        """Wait until `call` settles (or turns out cancelled), sending what is queued."""
        while not call._settled:
            self._sweep()
            if call._settled:
                break
            self._exchange(until=[call._id], wait_s=None)

    # ---- the event loop's side ----------------------------------------------------------

    def _awaited(self):
        """Ids of the queued and in-flight calls some task is waiting for."""
        return [c._id for c in (*self._queued, *self._in_flight.values())
                if not c._cancelled and c._waiters]

    @property
    def idle(self):
        """True when nothing needs the host: no call queued, no cancellation untold, and no
        task waiting on a call in flight (a call nobody awaits wakes no task)."""
        self._sweep()
        return not self._queued and not self._cancel and not self._awaited()

    def flush(self, wait_s):
        """Send the queued calls and cancellations; wait up to `wait_s` seconds (None:
        until the run's deadline) for one call a task awaits, if any."""
        self._sweep()
        until = self._awaited()
        self._exchange(until=until, wait_s=wait_s if until else 0)

    def _sweep(self):
        """Cancel the calls whose every awaiting task was cancelled: a queued one is dropped,
        one in flight is told to the host with the next batch."""
        for call in (*self._queued, *self._in_flight.values()):
            if call._cancelled or not call._waiters:
                continue
            live = [f for f in call._waiters if not f.cancelled()]
            if live:
                call._waiters = live
                continue
            call._cancelled, call._waiters = True, []
            if call._id in self._in_flight:
                self._cancel.append(call._id)
        if any(c._cancelled for c in self._queued):
            self._queued = [c for c in self._queued if not c._cancelled]

    def abandon(self):
        """The loop is closing: cancel the calls no task awaits any more and forget the
        awaiting futures; the calls themselves stay usable as values."""
        self._sweep()
        for call in (*self._queued, *self._in_flight.values()):
            call._waiters = []

    def drain(self):
        """The program ended: send what is queued and wait for every call still in flight
        that was not cancelled, so every call the program made has run. Cancellations not
        yet told go out only with such a batch: what remains when the run ends is the
        host's to abort, and a call it never started stays unstarted."""
        self._sweep()
        while True:
            until = [c._id for c in (*self._queued, *self._in_flight.values())
                     if not c._cancelled]
            if not until:
                break
            self._exchange(until=until, wait_s=None)

    def unused_note(self):
        """After `finish`: a warning naming the calls the program made in async code and
        never awaited nor used as a value (they ran, but the program never looked at what
        they returned, as `p is None` on a call would not have), or "" if there are none."""
        unused = [c for c in self._made if not c._used and not c._cancelled]
        self._made = []
        if not unused:
            return ""
        where = ", ".join(f"{c._alias}(...)" + (f" on line {c._line}" if c._line else "")
                          for c in unused[:10])
        more = f" and {len(unused) - 10} more" if len(unused) > 10 else ""
        return (f"warning: {len(unused)} tool call{'s were' if len(unused) != 1 else ' was'}"
                f" never awaited and {'their values' if len(unused) != 1 else 'its value'} "
                f"never used: {where}{more}. A call in async code returns a pending call: "
                f"`await` it (or use its value) before relying on what it returned.\n")

    def finish(self, value):
        """The program ended: `drain`, then return the run's value with every pending call
        in it settled (a failed one raises its rejection, as a program error)."""
        self.drain()
        return settle_nested(value)

    # ---- the wire -----------------------------------------------------------------------

    def _exchange(self, until, wait_s):
        """One batch: the queued calls (as many as fit in twice the per-call argument limit,
        at least one; the host refuses a batch over four times it), untold cancellations."""
        budget, size = 2 * self._max_request_bytes, 0
        for count, call in enumerate(self._queued):
            size += len(call._args_json)
            if count and size > budget:
                break
        else:
            count = len(self._queued)
        calls, self._queued = self._queued[:count], self._queued[count:]
        for call in calls:
            self._in_flight[call._id] = call
        cancel, self._cancel = self._cancel, []
        request = '{"calls":[%s],"cancel":%s,"wait_s":%s,"until":%s}' % (
            ",".join('{"id":%d,"name":%s,"args":%s%s}' % (
                c._id, json.dumps(c._name), c._args_json,
                "" if c._invalid is None else ',"invalid":' + json.dumps(c._invalid))
                for c in calls),
            json.dumps(cancel), json.dumps(wait_s), json.dumps(until),
        )
        reply = _decode_reply(self._dispatch(request))
        for outcome in reply.get("results", ()):
            call = self._in_flight.pop(outcome.get("id"), None)
            if call is not None:
                call._settle_with(outcome)


_SCALARS = (str, int, float, bool, type(None))


def encode_args(alias, args):
    """JSON text of `args`, or a TypeError naming what is not a JSON value.

    Strict where `json.dumps` is lenient: only dict (string keys), list, str, int, float
    (finite), bool and None, exact types; tuples, sets, bytes, non-string keys, cycles and
    other objects are refused. A pending call stands for its value (waited for here). The
    walk is iterative, so deep nesting cannot overflow it.
    """
    # The common case first: ASCII str keys and scalar values, checked and written in one
    # pass (in the guest ~1 us cheaper per call than checking, then calling the C encoder),
    # as the C encoder writes them.
    parts = []
    for key, value in args.items():
        if type(key) is not str or not key.isascii():
            break
        kind = type(value)
        if kind is int:
            if not _INT_MIN <= value < _INT_MAX:
                break
            parts.append(f"{_dump_str(key)}:{value}")
        elif kind is str:
            if not value.isascii():
                break
            parts.append(f"{_dump_str(key)}:{_dump_str(value)}")
        elif value is None:
            parts.append(f"{_dump_str(key)}:null")
        elif kind is bool:
            parts.append(f"{_dump_str(key)}:{'true' if value else 'false'}")
        elif kind is float and value - value == 0.0 and (value or _copysign(1.0, value) > 0):
            parts.append(f"{_dump_str(key)}:{value!r}")
        else:
            break                                 # not a scalar, or NaN, inf, -0.0
    else:
        return f"{{{','.join(parts)}}}"
    stack = [(args, "arguments", None)]
    active = set()     # ids of the containers on the current path: a repeat is a cycle
    while stack:
        value, parent, key = stack.pop()
        if value is _EXIT:
            active.discard(parent)
            continue
        kind = type(value)
        if kind is PendingCall:
            value = value._value()
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
    return _encode_checked(alias, args)


def _encode_checked(alias, args):
    """JSON text of `args`, which `encode_args` found to be JSON values."""
    try:
        return "".join(_ENCODE(args, 0))
    except RecursionError:
        raise TypeError(f"{alias}(): arguments are nested too deeply to be sent") from None
    except ValueError as exc:  # e.g. an int too large to convert to text
        raise TypeError(f"{alias}(): arguments cannot be sent as JSON: {exc}") from None


_SETTLE = json_default()
_dump_str = json.encoder.encode_basestring        # ensure_ascii=False, as `_ENCODE` writes
_SURROGATE = re.compile("[\ud800-\udfff]")
# json.dumps(allow_nan=False, ensure_ascii=False, separators=(",", ":"), default=_SETTLE),
# made once: `dumps` makes its encoder again at every call. No cycle check (`markers`):
# `encode_args` refused cycles before encoding.
_make_encoder = json.encoder.c_make_encoder  # type: ignore[attr-defined]  # CPython's C encoder
if _make_encoder is not None:
    _ENCODE = _make_encoder(
        None, _SETTLE, json.encoder.encode_basestring, None, ":", ",", False, False, False)
else:                                                     # CPython without its _json module
    _ENCODE = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"),
                               default=_SETTLE, check_circular=False).iterencode
_scan_reply = json.decoder.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _decode_reply(text):
    """The host's answer (JSON text it encoded itself) as a dict, each value untagged."""
    try:
        reply = _scan_reply(text, 0)[0]
    except StopIteration:
        reply = json.loads(text)      # raises json's own error for text that is not JSON
    if '"$' in text and isinstance(reply, dict):
        for outcome in reply.get("results", ()):
            if isinstance(outcome, dict) and "value" in outcome:
                outcome["value"] = untag(outcome["value"])
    return reply


def _untag_int(text):
    return int(text, 16) if text.lstrip("-").startswith("0x") else int(text)


_UNTAG = {"$int": _untag_int, "$float": float,
          "$dict": lambda pairs: {k: untag(v) for k, v in pairs}}


def untag(value):
    """A tool's value as the program sees it: the host's tags for what JSON cannot carry
    (`values.py`: `{"$int": "<digits>"}` beyond 64 bits, `{"$float": "nan"}` and the
    infinities and -0.0, `{"$dict": [[key, value]]}` for a tool's own one-key dict whose
    key is a tag) become the `int`, `float` and `dict` they stand for, at any depth."""
    if isinstance(value, list):
        return [untag(item) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        [(tag, body)] = value.items()
        decode = _UNTAG.get(tag)
        if decode is not None:
            return decode(body)
    return {key: untag(item) for key, item in value.items()}


_NOT_OK = object()


def _ok_value(text, call_id):
    """The value of call `call_id` when the host's answer `text` is exactly its success
    (`{"results":[{"id":<call_id>,"ok":true,"value":<value>}]}`); else `_NOT_OK`, and the
    answer is read whole (`_decode_reply`). Skips making the answer's dicts and list."""
    # The host's answer as it encodes it (no spaces, the fields in this order), up to the
    # value.
    head = f'{{"results":[{{"id":{call_id},"ok":true,"value":'
    if text.startswith(head) and text.endswith("}]}"):
        try:
            value, end = _scan_reply(text, len(head))
        except (StopIteration, ValueError):
            return _NOT_OK
        if end == len(text) - 3:
            return untag(value) if '"$' in text else value
    return _NOT_OK
_INT_RANGE = (-(2**63), 2**63)
_INT_MIN, _INT_MAX = _INT_RANGE
_copysign = math.copysign


def _scalar_problem(kind, value):
    """Why a str/int/float scalar cannot be sent losslessly, or None. The host refuses the
    same values (docs/pipeline-spec.md §1.1); refusing them here makes them a TypeError before
    anything is dispatched."""
    if kind is float:
        if value != value or value in (_INF, -_INF):
            return f"is {value!r}, which is not a JSON value"
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return "is -0.0, which JSON does not keep apart from 0"
    elif kind is int:
        if not _INT_RANGE[0] <= value < _INT_RANGE[1]:
            return "is an int outside the 64-bit range JSON tools accept"
    elif kind is str and not value.isascii() and _SURROGATE.search(value):
        return "contains an unpaired surrogate, which is not valid Unicode text"
    return None


def _path(parent, key):
    return parent if key is None else f"{parent}[{key!r}]"


_INF = float("inf")
_EXIT = object()


class Binding(introspect.Described):
    """The function a program calls for one tool. Its call shape is a real Python function
    (`signature.binder`), so CPython's own rules and messages apply to every call; what
    `inspect.signature` and `help` show of it is its stub's (`introspect.Described`)."""

    def __init__(self, bridge, spec, loop_getter):
        self._bridge = bridge
        self._loop_getter = loop_getter
        self._spec = spec
        self.name = spec["name"]
        self.alias = spec["alias"]
        # Made at the tool's first call (`_shape`), not here: a run binds every exposed tool
        # and calls few (binding eight tools ahead cost ~0.3 ms a run). Set to None now, so
        # that every binding's attributes keep one layout.
        self._signature = self._names = self._name_json = self._inspected = None
        self.__name__ = self.__qualname__ = self.alias
        self.__doc__ = spec.get("doc") or None

    def _shape(self):
        """The call-shape function (`signature.binder`), made once; with it, the positional
        parameters' names (what a wrong-shape call's arguments are recorded under) and the
        tool's name as it goes on the wire."""
        spec = self._spec
        params = spec.get("params", ())
        self._names = [p["name"] for p in params if not p.get("keyword_only")]
        self._name_json = json.dumps(self.name)
        self._signature = signature.binder(
            self.alias,
            [(p["name"], bool(p.get("required")), bool(p.get("keyword_only")),
              bool(p.get("omit_if_none"))) for p in params],
            bool(spec.get("accepts_extra", True)))
        return self._signature

    def __repr__(self):
        return f"<tool {self.alias}>"

    # `self` is positional-only so that a tool parameter named `self` can be a keyword.
    def __call__(self, /, *args, **kwargs):
        try:
            bound = (self._signature or self._shape())(*args, **kwargs)
        except TypeError as exc:
            invalid = str(exc)
        else:
            if _get_running_loop() is not None and self._loop_getter() is not None:
                sites = self._bridge.callsites
                frame = sys._getframe(1)
                if sites is None or sites.returns_pending(frame) is not False:
                    return self._bridge.submit(self.name, self.alias, bound, None,
                                               _program_line(frame))
            return self._bridge.call(self.name, self.alias, bound, None, self._name_json)
        # A call of the wrong shape is still a call: the host records the attempt and answers
        # INVALID_ARGS (raised as ToolArgumentError, a TypeError), unless the attempt is not
        # even JSON (a TypeError, nothing sent). Made outside the `except`, so the program's
        # traceback has no chained binding error.
        attempt = dict(zip(self._names, args, strict=False))
        for key, value in kwargs.items():
            attempt.setdefault(key, value)
        return self._bridge.call(self.name, self.alias, attempt, invalid=invalid)


def _program_line(frame):
    """The line of the program's own code that `frame` (or the nearest frame out of it of
    the program's code) is at; 0 when none is."""
    while frame is not None and frame.f_code.co_filename != "<program>":
        frame = frame.f_back
    return 0 if frame is None else frame.f_lineno


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
