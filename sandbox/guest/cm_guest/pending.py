"""A tool call made in async code: awaitable, and usable as its value.

In async code a call whose result may reach asyncio (see `callsite.py`) returns a
`PendingCall` instead of the value. Making it queues the call; it goes to the host with the
next batch, which is sent when every task waits, when any call's value is needed, or when
the program ends. So calls made one after another before anything waits run concurrently,
however the program stores them (a dict, a set, an attribute, a list built in a loop, a
helper's return value, `map`, a generator).

A pending call is

- awaitable any number of times (`await p`, and every asyncio entry point: `gather`,
  `wait`, `as_completed`, `create_task`, `TaskGroup.create_task`, `wait_for`,
  `ensure_future`, `shield`; see `aio.py`). A failed call raises its `ToolCallError` in each
  awaiting task;
- its value wherever it is used as one: attribute access, `[]`, iteration, `len`, `in`,
  operators, comparisons, truthiness, `str`/`repr`/`format`, `int`/`float`, `copy`,
  `json.dumps`, `isinstance`, tool arguments and the run's value. The first such use waits
  for the call (sending every queued call with it) and raises its `ToolCallError` if it
  failed.

It is not the value itself, but where it would pass for something else the program is
made to wait for the value: `p is None`, `type(p)` and `p in container` in the program's
code are rewritten to use the value (`settling.py`). C functions that demand an exact type
(`", ".join([p])`, `re.match(p, s)`) raise a TypeError naming `PendingCall`; `hash(p)` is
by identity (so sets of pending calls work; use the value, not the call, as a dict key). A
call that was never awaited nor used as a value still runs, and the run's stderr says so
(`tools.Bridge.unused_note`). When every
task awaiting a call is cancelled, the call is cancelled: dropped if not yet sent, aborted
on the host otherwise; using or awaiting it afterwards raises `asyncio.CancelledError`.
"""

import asyncio
import asyncio.events
import builtins
import copy
import json
import operator

from .errors import rejection


class PendingCall:
    """One tool call the program made in async code (see the module docstring).

    It has no public attributes of its own, so every attribute name is the value's; its
    state (underscored) is read and written by the `tools.Bridge` that made it.
    """

    __slots__ = (
        "_alias",
        "_args_json",
        "_bridge",
        "_cancelled",
        "_id",
        "_invalid",
        "_line",
        "_name",
        "_outcome",
        "_used",
        "_waiters",
    )

    def __init__(self, bridge, call_id, name, alias, args_json, line=None):
        self._bridge = bridge
        self._id = call_id
        self._name = name
        self._alias = alias
        self._args_json = args_json
        self._invalid = None         # why it does not fit the signature (sent to the host)
        self._outcome = None         # the host's outcome dict, once settled
        self._cancelled = False
        self._waiters = []           # loop futures of awaiting tasks, until settled
        self._line = line            # the program's line that made the call, if known
        self._used = False           # awaited, or its value read (`Bridge.unused_note`)

    # ---- the bridge's side ---------------------------------------------------------------

    @property
    def _settled(self):
        return self._outcome is not None or self._cancelled

    def _deliver(self, future):
        """Complete `future` with this call's value or rejection."""
        if self._cancelled:
            future.cancel()
            return
        try:
            future.set_result(self._result())
        except BaseException as exc:      # a rejection travels to the awaiting task
            future.set_exception(exc)

    def _settle_with(self, outcome):
        self._outcome = outcome
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                self._deliver(future)

    def _result(self):
        """The value, or raise the rejection (a fresh exception per use)."""
        if self._cancelled:
            raise asyncio.CancelledError(f"the call of {self._alias}(...) was cancelled")
        outcome = self._outcome
        if outcome.get("ok") is True:
            return outcome.get("value")
        raise rejection(self._name, outcome.get("code") or "TOOL_ERROR",
                        outcome.get("message") or "tool call failed")

    def _value(self):
        """Wait for the call if it has not settled (sending the queued calls with it)."""
        self._used = True
        if not self._settled:
            self._bridge.resolve(self)
        return self._result()

    def _future(self, loop=None):
        """A future of the running loop that completes with the value (one per waiter)."""
        loop = loop or asyncio.events.get_running_loop()
        self._used = True
        future = loop.create_future()
        if self._settled:
            self._deliver(future)
        else:
            self._waiters.append(future)
        return future

    # ---- awaiting -----------------------------------------------------------------------

    def __await__(self):
        if self._settled or asyncio.events._get_running_loop() is None:
            return self._value()
        return (yield from self._future())

    # ---- the value's protocol -----------------------------------------------------------

    def __getattr__(self, name):
        if name in _OWN:                 # a slot read before it was set
            raise AttributeError(name)
        return getattr(self._value(), name)

    def __repr__(self):
        return repr(self._value())

    def __str__(self):
        return str(self._value())

    def __format__(self, spec):
        return format(self._value(), spec)

    def __bool__(self):
        return bool(self._value())

    def __len__(self):
        return len(self._value())

    def __iter__(self):
        return iter(self._value())

    def __reversed__(self):
        return reversed(self._value())

    def __contains__(self, item):
        return settle(item) in self._value()

    def __getitem__(self, key):
        return self._value()[settle(key)]

    def __setitem__(self, key, item):
        self._value()[settle(key)] = item

    def __delitem__(self, key):
        del self._value()[settle(key)]

    __hash__ = object.__hash__          # identity: sets of pending calls stay pending

    def __round__(self, ndigits=None):
        return round(self._value(), ndigits)

    def __pow__(self, other, mod=None):
        return pow(self._value(), settle(other), settle(mod))

    def __rpow__(self, other):
        return pow(settle(other), self._value())

    def __copy__(self):
        return copy.copy(self._value())

    def __deepcopy__(self, memo):
        return copy.deepcopy(self._value(), memo)

    def __dir__(self):
        return dir(self._value())


_OWN = frozenset(PendingCall.__slots__)


def _binary(op):
    return (lambda self, other: op(self._value(), settle(other)),
            lambda self, other: op(settle(other), self._value()))


def _unary(fn):
    return lambda self: fn(self._value())


for _name in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "lshift", "rshift",
              "and", "xor", "or"):
    _op = getattr(operator, _name + ("_" if _name in ("and", "or") else ""))
    _forward, _reflected = _binary(_op)
    setattr(PendingCall, f"__{_name}__", _forward)
    setattr(PendingCall, f"__r{_name}__", _reflected)
    _inplace = getattr(operator, f"i{_name}")
    setattr(PendingCall, f"__i{_name}__",
            lambda self, other, _inplace=_inplace: _inplace(self._value(), settle(other)))
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(PendingCall, f"__{_name}__", _binary(getattr(operator, _name))[0])
setattr(PendingCall, "__divmod__", _binary(divmod)[0])   # noqa: B010  (typed by setattr)
setattr(PendingCall, "__rdivmod__", _binary(divmod)[1])  # noqa: B010
for _name, _fn in (("neg", operator.neg), ("pos", operator.pos), ("abs", abs),
                   ("invert", operator.invert), ("int", int), ("float", float),
                   ("complex", complex), ("index", operator.index),
                   ("trunc", lambda v: v.__trunc__()), ("floor", lambda v: v.__floor__()),
                   ("ceil", lambda v: v.__ceil__())):
    setattr(PendingCall, f"__{_name}__", _unary(_fn))
del _name, _op, _forward, _reflected, _inplace, _fn


def settle(value):
    """`value`, or the value of a pending call (waiting for it if need be)."""
    return value._value() if type(value) is PendingCall else value


def contains(item, container, /):
    """`item in container` for the program (`settling.py`): also True when `item` is a
    pending call whose value is in `container` (a set or dict hashes the call itself by
    identity)."""
    if item in container:
        return True
    return type(item) is PendingCall and item._value() in container


def settle_nested(value):
    """Wait for every pending call in `value` (dicts, lists, tuples and sets, walked
    iteratively), raising the first rejection; return `settle(value)`. For the run's value,
    so a failed call there is a program error, not an unencodable value."""
    stack, seen = [value], set()
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is PendingCall:
            stack.append(item._value())
        elif kind in (dict, list, tuple, set, frozenset) and id(item) not in seen:
            seen.add(id(item))
            stack.extend(item.values() if kind is dict else item)
    return settle(value)


def json_default(default=None):
    """A `default=` for `json.dumps` that encodes a pending call as its value, then defers
    to `default` (or refuses, as json does)."""
    def encode(obj):
        if type(obj) is PendingCall:
            return obj._value()
        if default is not None:
            return default(obj)
        raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")
    return encode


def json_functions(json_module=json):
    """`dumps` and `dump` of `json_module` that encode pending calls as their values (when
    the program passes no `cls` of its own), for the program's `json` module."""
    dumps, dump = json_module.dumps, json_module.dump

    def _dumps(obj, *, cls=None, default=None, **kwargs):
        if cls is None:
            default = json_default(default)
        return dumps(obj, cls=cls, default=default, **kwargs)

    def _dump(obj, fp, *, cls=None, default=None, **kwargs):
        if cls is None:
            default = json_default(default)
        return dump(obj, fp, cls=cls, default=default, **kwargs)

    _dumps.__doc__, _dump.__doc__ = dumps.__doc__, dump.__doc__
    _dumps.__name__ = _dumps.__qualname__ = "dumps"
    _dump.__name__ = _dump.__qualname__ = "dump"
    return {"dumps": _dumps, "dump": _dump}


_isinstance = builtins.isinstance


def isinstance_(obj, classinfo, /):
    """The program's `isinstance`: a pending call is an instance of its value's types too."""
    if type(obj) is PendingCall and not _isinstance(obj, classinfo):
        return _isinstance(obj._value(), classinfo)
    return _isinstance(obj, classinfo)


isinstance_.__name__ = isinstance_.__qualname__ = "isinstance"
isinstance_.__doc__ = builtins.isinstance.__doc__
