"""JSON Schema as Python types: the type expression of one schema position, and the
TypedDicts it needs (docs/design.md §3-4).

Separate from `stubs`, which builds a tool's signature, docstring and alias on top of it:
turning a schema into types is its own recursive job (`$ref`s resolved, cycles closed,
class names allocated across the tools of one stubs module).

Type mapping (anything else, or no schema at all, is `Any`):

    string / integer / number / boolean / null   str / int / float / bool / None
    {"type": [T, "null"]}, anyOf/oneOf with null  T | None
    other anyOf / oneOf                           T1 | T2 | ...
    enum / const (str, int, bool, None values)    Literal[...]  (more than MAX_LITERAL_VALUES
                                                  values: the plain type instead)
    array with items / without                    list[T] / list[Any]
    object with properties                        a TypedDict (required keys plain, the others
                                                  NotRequired[...]), named CamelCase from the
                                                  tool alias and the property path
    object without properties                     dict[str, T] from additionalProperties, else
                                                  dict[str, Any]
    $ref "#/$defs/X", "#/definitions/X", "#"      resolved; an object becomes TypedDict `X`; a
                                                  reference back into a class under
                                                  construction is the quoted class name

Class names. Nested objects are named `<Alias><Prop>...` (`get_weather`'s `address.geo` is
`GetWeatherAddressGeo`), array items add `Item`, dict values add `Value`, the object returned by
a tool is `<Alias>Result`, a `$defs` entry keeps its own name. A name already used for a
different definition (or reserved: typing names, tool aliases) gets a suffix `_2`, `_3`, ...
A class with the same fields (keys and types) as one already made, by this tool or by a tool
built before it in `build_stubs` (sorted by name), is that class, under its first name: the
same user object returned inline by a hundred tools is one `TypedDict`, which `stubs_module`
and `describe_tools` print once. A class whose fields refer back to a class under
construction (a recursive schema) keeps its own name.

What a value accepts beyond its type (`format`, `pattern`, bounds, lengths, long enums, an
example) is not a type: `_accepts` says it in words for the docstring's `Args:` section.
"""

from __future__ import annotations

import json
import keyword
import math
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

__all__ = ["LOSSLESS_MARKER_KEY", "MAX_LITERAL_VALUES", "MAX_PARAM_DOC_CHARS"]

LOSSLESS_MARKER_KEY = "x-codemode-lossless-marker"
"""Marks a branch of an output schema that admits the run's lossless tags (`{"$int": ...}`,
`{"$float": "nan"}`: values JSON would not carry exactly); stubs leave such a branch out of
the return type. MCP results are where the tags arise (`codemode._mcp.values`)."""

MAX_LITERAL_VALUES = 50
"""An enum with more values than this is typed by its base type (`str`), to keep stubs small."""

MAX_PARAM_DOC_CHARS = 400
"""A parameter's line in a stub's `Args:` section (its description and what its schema says
it accepts) is cut to this many characters, ending in "…"."""

# The typing names the stubs module imports: no class takes one (nor a tool alias: `stubs`).
_TYPING_NAMES = frozenset({"Any", "Literal", "NotRequired", "TypedDict", "annotations"})

_MAX_DEPTH = 32  # schema nesting deeper than this is typed Any


def _is_name(key: str) -> bool:
    """`key` can be written as a Python name and arrives as itself: an identifier, not a
    keyword, and unchanged by NFKC (the parser normalizes identifiers, so `ﬁle=` would
    reach the tool as `file`)."""
    return (key.isidentifier() and not keyword.iskeyword(key)
            and (key.isascii() or unicodedata.normalize("NFKC", key) == key))


def _camel(text: str) -> str:
    """'get_weather' -> 'GetWeather', 'maxCount' -> 'MaxCount', '2fa' -> '_2fa'."""
    parts = [p for p in re.split(r"[^A-Za-z0-9]+", text) if p]
    name = "".join(p[0].upper() + p[1:] for p in parts) or "Object"
    return "_" + name if name[0].isdigit() else name


# --------------------------------------------------------------------------- schema -> types


class _ClassTable:
    """Class names of one stubs module -> definition text; plus names classes may not take."""

    def __init__(self, reserved: Iterable[str]) -> None:
        self.reserved = set(reserved) | _TYPING_NAMES
        self.defs: dict[str, str] = {}
        self.shapes: dict[_Shape, str] = {}  # the fields of a class -> its name


# A TypedDict's fields, (key, type as written): two classes with the same are one class.
_Shape = tuple[tuple[str, str], ...]


_Source = tuple[str, str]  # (schema tag "in"/"out", JSON pointer of the position)


class _Converter:
    """Turns the schemas of one tool into type expressions and TypedDict definitions.

    `bumps` moves a class off a name that another tool already defines differently; the
    caller retries the whole tool with it, so every reference uses the final name.
    """

    def __init__(self, table: _ClassTable, bumps: dict[_Source, int]) -> None:
        self.table = table
        self.bumps = bumps
        self.local_names: dict[str, _Source] = {}
        self.used_index: dict[_Source, int] = {}
        self.classes: dict[str, str] = {}  # name -> definition, in completion order
        self.shapes: dict[_Shape, str] = {}  # the fields of a class made here -> its name
        self.hits = 0  # how often a position under construction was reached again
        self.class_source: dict[str, _Source] = {}
        self.memo: dict[_Source, str] = {}
        self.active: dict[_Source, str | None] = {}  # under construction -> its class name
        self.stack: list[_Source] = []  # the sources in `active`, outermost first
        self.lowest_hit = 0  # stack index of the outermost active source reached again
        self.roots: dict[str, Any] = {}  # tag -> the schema its "$ref"s point into
        self.root_base: dict[str, str] = {}  # tag -> class base name of the root itself

    # -- names

    def allocate(self, source: _Source, base: str) -> str:
        if source in self.used_index:  # computed again after a cycle closed: same name
            k = self.used_index[source]
            return base if k == 0 else f"{base}_{k + 1}"
        k = self.bumps.get(source, 0)
        while True:
            name = base if k == 0 else f"{base}_{k + 1}"
            if name not in self.table.reserved and name not in self.local_names:
                break
            k += 1
        self.local_names[name] = source
        self.used_index[source] = k
        return name

    def conflicts(self) -> list[_Source]:
        return [
            self.class_source[name]
            for name, text in self.classes.items()
            if self.table.defs.get(name, text) != text
        ]

    # -- types

    def type_of(self, schema: Any, tag: str, path: str, base: str, depth: int = 0) -> str:
        """The type expression of `schema` found at `path` (a JSON pointer) in root `tag`.

        A position reached again while under construction (a recursive `$ref`) is the quoted
        class name, or `Any` if it is not a class. A result that depends on such a position
        further up is not memoized, so it is computed afresh once the cycle is closed.
        """
        source = (tag, path)
        if source in self.memo:
            return self.memo[source]
        if source in self.active:
            self.hits += 1
            self.lowest_hit = min(self.lowest_hit, self.stack.index(source))
            name = self.active[source]
            return json.dumps(name) if name else "Any"
        if depth > _MAX_DEPTH or not isinstance(schema, dict):
            return "Any"
        level = len(self.stack)
        outer_hit, self.lowest_hit = self.lowest_hit, level
        self.active[source] = None
        self.stack.append(source)
        try:
            result = self._type_of(schema, tag, path, base, depth)
        finally:
            del self.active[source]
            self.stack.pop()
        if self.lowest_hit >= level:
            self.memo[source] = result
            self.lowest_hit = outer_hit
        else:
            self.lowest_hit = min(outer_hit, self.lowest_hit)
        return result

    def _type_of(self, schema: dict[str, Any], tag: str, path: str, base: str, depth: int) -> str:
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self._ref(ref, tag, depth)
        nullable = schema.get("nullable") is True  # OpenAPI 3.0 style
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                parts = [
                    self.type_of(o, tag, f"{path}/{key}/{i}", base, depth + 1)
                    for i, o in enumerate(options)
                    # the tag of a value JSON cannot carry (an MCP tool's output): not a type
                    # the program should expect (codemode/_mcp/values.py)
                    if not (isinstance(o, dict) and o.get(LOSSLESS_MARKER_KEY) is True)
                ]
                if parts:
                    return _union([*parts, "None"] if nullable else parts)
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1:
            return self.type_of(all_of[0], tag, f"{path}/allOf/0", base, depth + 1)
        if "const" in schema or isinstance(schema.get("enum"), list):
            values = [schema["const"]] if "const" in schema else schema["enum"]
            literal = _literal(values)
            if literal is not None:
                return _union([literal, "None"] if nullable else [literal])
        types = schema.get("type")
        if isinstance(types, str):
            types = [types]
        elif not isinstance(types, list) or not types:
            if isinstance(schema.get("properties"), dict):
                types = ["object"]
            elif "items" in schema:
                types = ["array"]
            else:
                return "Any"
        parts = [self._typed(t, schema, tag, path, base, depth) for t in types]
        return _union([*parts, "None"] if nullable else parts)

    def _typed(
        self, type_: Any, schema: dict[str, Any], tag: str, path: str, base: str, depth: int
    ) -> str:
        simple = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
        if type_ in simple:
            return simple[type_]
        if type_ == "null":
            return "None"
        if type_ == "array":
            items = schema.get("items")
            if isinstance(items, dict):
                item = self.type_of(items, tag, f"{path}/items", base + "Item", depth + 1)
                return f"list[{item}]"
            return "list[Any]"
        if type_ == "object":
            props = schema.get("properties")
            if isinstance(props, dict) and props:
                return self._typed_dict(schema, props, tag, path, base, depth)
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict):
                value = self.type_of(
                    extra, tag, f"{path}/additionalProperties", base + "Value", depth + 1
                )
                return f"dict[str, {value}]"
            return "dict[str, Any]"
        return "Any"

    def _typed_dict(
        self,
        schema: dict[str, Any],
        props: dict[str, Any],
        tag: str,
        path: str,
        base: str,
        depth: int,
    ) -> str:
        source = (tag, path)
        name = self.allocate(source, base)
        self.active[source] = name
        required = _required(schema)
        fields: list[tuple[str, str]] = []
        hits = self.hits
        for key, sub in props.items():
            t = self.type_of(
                sub, tag, f"{path}/properties/{_escape(key)}", base + _camel(key), depth + 1
            )
            fields.append((key, t if key in required else f"NotRequired[{t}]"))
        shape = tuple(fields)
        same = self.shapes.get(shape) or self.table.shapes.get(shape)
        if same is not None and self.hits == hits:
            # The fields of a class already made (here or by an earlier tool), and none is
            # a class under construction: that class, under its name. This name stays
            # taken, so that a position computed again keeps its answer.
            self.classes.setdefault(same, self.table.defs.get(same, ""))
            return same
        if all(_is_name(k) and not k.startswith("__") for k, _ in fields):
            lines = [f"class {name}(TypedDict):", *(f"    {k}: {t}" for k, t in fields)]
            text = "\n".join(lines)
        else:
            items = ", ".join(f"{_py_literal(k)}: {t}" for k, t in fields)
            text = f"{name} = TypedDict({json.dumps(name)}, {{{items}}})"
        self.classes[name] = text
        self.class_source[name] = source
        self.shapes.setdefault(shape, name)
        return name

    def _ref(self, ref: str, tag: str, depth: int) -> str:
        if ref == "#":
            pointer, segments = "#", []
        elif ref.startswith("#/"):
            pointer = ref
            segments = [s.replace("~1", "/").replace("~0", "~") for s in ref[2:].split("/")]
        else:
            return "Any"  # remote references are not fetched
        target: Any = self.roots[tag]
        for seg in segments:
            if isinstance(target, dict) and seg in target:
                target = target[seg]
            elif isinstance(target, list) and seg.isdigit() and int(seg) < len(target):
                target = target[int(seg)]
            else:
                return "Any"
        base = _camel(segments[-1]) if segments else self.root_base[tag]
        return self.type_of(target, tag, pointer, base, depth + 1)


def _arguments_object(root: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The object schema whose properties are the parameters, and its JSON pointer.

    A root that is only a local reference (`{"$ref": "#/$defs/Args", "$defs": ...}`) stands
    for its target; anything that does not resolve to an object gives `{}`.
    """
    ref = root.get("$ref")
    if not (isinstance(ref, str) and ref.startswith("#/")):
        return root, "#"
    target: Any = root
    for seg in ref[2:].split("/"):
        seg = seg.replace("~1", "/").replace("~0", "~")
        target = target.get(seg) if isinstance(target, dict) else None
    return (target if isinstance(target, dict) else {}), ref


def _refers_to_root(schema: Any) -> bool:
    if isinstance(schema, dict):
        return schema.get("$ref") == "#" or any(_refers_to_root(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_refers_to_root(v) for v in schema)
    return False


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _required(schema: dict[str, Any]) -> list[str]:
    req = schema.get("required")
    return [r for r in req if isinstance(r, str)] if isinstance(req, list) else []


def _split_union(expr: str) -> list[str]:
    parts, depth, start = [], 0, 0
    in_str = False
    i = 0
    while i < len(expr):
        c = expr[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        elif depth == 0 and expr.startswith(" | ", i):
            parts.append(expr[start:i])
            start = i + 3
            i += 2
        i += 1
    parts.append(expr[start:])
    return parts


def _union(parts: Iterable[str]) -> str:
    flat: list[str] = []
    for part in parts:
        for p in _split_union(part):
            if p not in flat:
                flat.append(p)
    if "Any" in flat:
        return "Any"
    if "None" in flat:
        flat.remove("None")
        flat.append("None")
    return " | ".join(flat)


def _admits_none(expr: str) -> bool:
    parts = _split_union(expr)
    return "None" in parts or "Any" in parts


def _literal(values: list[Any]) -> str | None:
    """`Literal[...]` (plus `| None`) for str/int/bool/None values, else None."""
    if not values or len(values) > MAX_LITERAL_VALUES:
        return None
    rendered: list[str] = []
    has_none = False
    for v in values:
        if v is None:
            has_none = True
        elif isinstance(v, (bool, int, str)):
            text = _py_literal(v)
            if text is not None and text not in rendered:
                rendered.append(text)
        else:
            return None
    if not rendered:
        return "None"
    literal = f"Literal[{', '.join(rendered)}]"
    return f"{literal} | None" if has_none else literal


def _py_literal(value: Any) -> str | None:
    """A Python literal for a JSON value (strings in double quotes), or None if there is none."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return text if not re.search("[\ud800-\udfff]", text) else json.dumps(value)
    if isinstance(value, list):
        items = [_py_literal(v) for v in value]
        shown = [i for i in items if i is not None]
        return f"[{', '.join(shown)}]" if len(shown) == len(items) else None
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        pairs = [
            f"{_py_literal(k)}: {v}"
            for k, v in ((k, _py_literal(v)) for k, v in value.items())
            if v is not None
        ]
        return "{" + ", ".join(pairs) + "}" if len(pairs) == len(value) else None
    return None


# --------------------------------------------------------------------------- what a value accepts

_MAX_FACT_CHARS = 120  # one fact (a pattern, an example, a list of values) is cut to this
_MAX_LISTED_VALUES = 20  # an enum not shown as a Literal lists this many values, then a count


def _accepts(schema: Any, *, shown_default: bool) -> list[str]:
    """What `schema` says a value accepts beyond its Python type, as short phrases:
    `format`, `pattern`, numeric bounds (`>= 1`, `< 10`, `multiple of 5`), string lengths,
    item counts, `unique items`, the values of an enum too long for `Literal[...]`, the
    default when the signature cannot show it (`shown_default` False), the first example,
    and `deprecated`. A nullable schema (`anyOf`/`oneOf` with one branch besides null, or
    an `allOf` of one) is read through to that branch."""
    if not isinstance(schema, dict):
        return []
    facts: list[str] = []
    if schema.get("deprecated") is True:
        facts.append("deprecated")
    if not shown_default and "default" in schema:
        facts.append("default " + _fact_value(schema["default"]))
    branch = _one_branch(schema)
    if "enum" in branch or "const" in branch:
        values = [branch["const"]] if "const" in branch else branch["enum"]
        if isinstance(values, list) and values and _literal(values) is None:
            shown = ", ".join(_fact_value(v) for v in values[:_MAX_LISTED_VALUES])
            more = len(values) - _MAX_LISTED_VALUES
            facts.append(f"one of {shown}" + (f" and {more} more" if more > 0 else ""))
    fmt = branch.get("format")
    if isinstance(fmt, str) and fmt:
        facts.append(f"format {_cut(fmt)}")
    pattern = branch.get("pattern")
    if isinstance(pattern, str) and pattern:
        facts.append(f"pattern {_cut(pattern)}")
    facts += _bounds(branch)
    examples = schema.get("examples", branch.get("examples"))
    if isinstance(examples, list) and examples:
        facts.append("e.g. " + _fact_value(examples[0]))
    return facts


def _bounds(schema: dict[str, Any]) -> list[str]:
    facts: list[str] = []
    lo, hi = schema.get("minimum"), schema.get("maximum")
    lo_x, hi_x = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if _is_number(lo_x):  # JSON Schema 2019+: the bound itself
        facts.append(f"> {lo_x}")
    elif _is_number(lo):
        facts.append(f"{'>' if lo_x is True else '>='} {lo}")  # draft 4: a flag on minimum
    if _is_number(hi_x):
        facts.append(f"< {hi_x}")
    elif _is_number(hi):
        facts.append(f"{'<' if hi_x is True else '<='} {hi}")
    if _is_number(schema.get("multipleOf")):
        facts.append(f"multiple of {schema['multipleOf']}")
    for low, high, what in (("minLength", "maxLength", "characters"),
                            ("minItems", "maxItems", "items"),
                            ("minProperties", "maxProperties", "keys")):
        n, m = schema.get(low), schema.get(high)
        n = n if _is_number(n) else None
        m = m if _is_number(m) else None
        if n is not None and m is not None:
            facts.append(f"exactly {_count(n, what)}" if n == m else f"{n}-{m} {what}")
        elif n is not None:
            facts.append(f"at least {_count(n, what)}")
        elif m is not None:
            facts.append(f"at most {_count(m, what)}")
    if schema.get("uniqueItems") is True:
        facts.append("unique items")
    return facts


def _count(n: float, what: str) -> str:
    return f"{n} {what[:-1] if n == 1 else what}"


def _one_branch(schema: dict[str, Any]) -> dict[str, Any]:
    """The branch of a nullable union (or a lone `allOf`) that says what a value is."""
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list):
            real = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
            if len(real) == 1:
                return _one_branch(real[0])
    return schema


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fact_value(value: Any) -> str:
    text = _py_literal(value)
    return _cut(text if text is not None else json.dumps(value, ensure_ascii=False))


def _cut(text: str, limit: int = _MAX_FACT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
