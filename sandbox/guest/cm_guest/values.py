"""The run's final value as JSON, without loss and within a byte budget (docs/sandbox.md).

JSON values that round-trip exactly stay plain JSON: `None`, `bool`, `str`, `int` in the
64-bit range, finite `float` other than -0.0, `list`, and `dict` with `str` keys. Anything
else becomes an object with exactly one key, its tag:

    {"$float": "nan" | "inf" | "-inf" | "-0.0"}
    {"$int": "<decimal digits>" | "0x<hex digits>"}     beyond 64 bits; hex past 4300 digits
    {"$tuple": [...]}  {"$set": [...]}  {"$frozenset": [...]}   sets sorted when sortable
    {"$dict": [[key, value], ...]}    keys that are not all str, or a one-key dict whose key
                                      is a tag (so a tag never means two things)
    {"$bytes": "<base64>"}  {"$bytearray": "<base64>"}
    {"$datetime": "<isoformat>"}  {"$date": ...}  {"$time": ...}
    {"$timedelta": [days, seconds, microseconds]}
    {"$decimal": "<str>"}  {"$complex": [real, imag]}
    {"$repr": "<repr() text>"}        any other object, a str holding unpaired surrogates,
                                      and a container met again inside itself ("[...]")
    {"$cut": "<why>"}                 what was left out: nesting deeper than MAX_DEPTH

Subclasses of str, int, float, dict and list (StrEnum, IntEnum, OrderedDict, Counter)
encode as their base type; a tuple subclass (a namedtuple) as its `$repr`.
`decode_value` on the host (`codemode.sandbox.decode_value`) turns the tags back into
Python objects.
"""

import base64
import datetime
import decimal
import json
import math
import re

from .pending import PendingCall

MAX_DEPTH = 500
INT_DECIMAL_DIGITS = 4300      # CPython's int/str conversion limit
_INT_RANGE = (-(2**63), 2**63)

TAGS = frozenset({"$float", "$int", "$tuple", "$set", "$frozenset", "$dict", "$bytes",
                  "$bytearray", "$datetime", "$date", "$time", "$timedelta", "$decimal",
                  "$complex", "$repr", "$cut"})

_SURROGATE = re.compile("[\ud800-\udfff]")
_dump_str = json.encoder.encode_basestring        # ensure_ascii=False: stays short


class ValueTooLarge(Exception):
    """The value's JSON would be more than the budget (`limit_bytes`)."""

    def __init__(self, limit_bytes):
        super().__init__(f"the final value is more than {limit_bytes} bytes of JSON, over "
                         f"the output limit of {limit_bytes} bytes")
        self.limit_bytes = limit_bytes


def _repr(value):
    try:
        return repr(value)
    except RecursionError:
        return f"<{type(value).__name__} object nested too deeply to show>"
    except BaseException:       # the program's __repr__ may raise anything
        return f"<unprintable {type(value).__name__} object>"


class _Encoder:
    def __init__(self, limit_bytes):
        self.limit = limit_bytes
        self.size = 0
        self.parts = []
        self.active = set()      # ids of the containers on the current path

    def put(self, text):
        self.size += len(text)
        if self.size > self.limit:
            raise ValueTooLarge(self.limit)
        self.parts.append(text)

    def tagged(self, tag, text):
        self.put('{"%s":' % tag)
        self.put(text)
        self.put("}")

    def string(self, text):
        if len(text) + self.size > self.limit:       # before building its JSON
            raise ValueTooLarge(self.limit)
        self.put(_dump_str(text))

    def value(self, v, depth):
        if type(v) is PendingCall:          # settled by now (Bridge.finish): its value
            v = v._value()
        kind = type(v)
        if v is None:
            self.put("null")
        elif v is True or v is False:
            self.put("true" if v else "false")
        elif isinstance(v, str):
            if _SURROGATE.search(v):
                self.put('{"$repr":')
                self.string(_repr(v))
                self.put("}")
            else:
                self.string(v)
        elif isinstance(v, int):
            self.integer(int(v))
        elif isinstance(v, float):
            self.float_(float(v))
        elif isinstance(v, (list, tuple, set, frozenset, dict)):
            self.container(v, depth)
        elif isinstance(v, (bytes, bytearray)):
            tag = "$bytearray" if isinstance(v, bytearray) else "$bytes"
            if len(v) * 4 // 3 + self.size > self.limit:
                raise ValueTooLarge(self.limit)
            self.tagged(tag, '"%s"' % base64.b64encode(v).decode("ascii"))
        elif isinstance(v, datetime.datetime):
            self.tagged("$datetime", _dump_str(v.isoformat()))
        elif isinstance(v, datetime.date):
            self.tagged("$date", _dump_str(v.isoformat()))
        elif isinstance(v, datetime.time):
            self.tagged("$time", _dump_str(v.isoformat()))
        elif isinstance(v, datetime.timedelta):
            self.tagged("$timedelta", "[%d,%d,%d]" % (v.days, v.seconds, v.microseconds))
        elif isinstance(v, decimal.Decimal):
            self.tagged("$decimal", _dump_str(str(v)))
        elif kind is complex:
            self.put('{"$complex":[')
            self.float_(v.real)
            self.put(",")
            self.float_(v.imag)
            self.put("]}")
        else:
            self.put('{"$repr":')
            self.string(_repr(v))
            self.put("}")

    def integer(self, v):
        if _INT_RANGE[0] <= v < _INT_RANGE[1]:
            self.put(str(v))
            return
        digits = v.bit_length() * 0.30103
        if digits + self.size > self.limit:
            raise ValueTooLarge(self.limit)
        text = str(v) if digits < INT_DECIMAL_DIGITS - 2 else hex(v)
        self.tagged("$int", '"%s"' % text)

    def float_(self, v):
        if math.isfinite(v) and not (v == 0.0 and math.copysign(1.0, v) < 0):
            self.put(float.__repr__(v))
        else:
            self.tagged("$float", '"%s"' % ("nan" if v != v else float.__repr__(v)))

    def container(self, v, depth):
        if id(v) in self.active:                      # a cycle: shown as repr() shows it
            self.tagged("$repr", '"{...}"' if isinstance(v, dict) else '"[...]"')
            return
        if depth >= MAX_DEPTH:
            self.tagged("$cut", _dump_str(f"{type(v).__name__} nested deeper than "
                                          f"{MAX_DEPTH} levels"))
            return
        if isinstance(v, tuple) and type(v) is not tuple:    # a namedtuple: keep its names
            self.put('{"$repr":')
            self.string(_repr(v))
            self.put("}")
            return
        self.active.add(id(v))
        try:
            if isinstance(v, dict):
                self.mapping(v, depth)
            elif isinstance(v, list):
                self.sequence(v, depth)
            elif isinstance(v, tuple):
                self.put('{"$tuple":')
                self.sequence(v, depth)
                self.put("}")
            else:
                items = list(v)
                try:
                    items.sort()
                except Exception:
                    pass
                self.put('{"$set":' if isinstance(v, set) else '{"$frozenset":')
                self.sequence(items, depth)
                self.put("}")
        finally:
            self.active.discard(id(v))

    def sequence(self, items, depth):
        self.put("[")
        for i, item in enumerate(items):
            if i:
                self.put(",")
            self.value(item, depth + 1)
        self.put("]")

    def mapping(self, v, depth):
        keys = list(v)
        plain = all(type(k) is str and not _SURROGATE.search(k) for k in keys) \
            and not (len(keys) == 1 and keys[0] in TAGS)
        if plain:
            self.put("{")
            for i, key in enumerate(keys):
                if i:
                    self.put(",")
                self.string(key)
                self.put(":")
                self.value(v[key], depth + 1)
            self.put("}")
            return
        self.put('{"$dict":[')
        for i, key in enumerate(keys):
            if i:
                self.put(",")
            self.put("[")
            self.value(key, depth + 1)
            self.put(",")
            self.value(v[key], depth + 1)
            self.put("]")
        self.put("]}")


def encode(value, limit_bytes):
    """JSON text of `value` in the encoding above, at most `limit_bytes` bytes of UTF-8.

    Raises:
        ValueTooLarge: the text would be longer; it is never built whole.
    """
    encoder = _Encoder(limit_bytes)
    encoder.value(value, 0)
    text = "".join(encoder.parts)
    if len(text.encode("utf-8", "surrogatepass")) > limit_bytes:
        raise ValueTooLarge(limit_bytes)
    return text
