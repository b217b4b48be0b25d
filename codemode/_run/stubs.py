"""Model-facing Python signatures for tools, derived from their JSON Schemas (docs/design.md §3-4).

Each tool becomes a `ToolStub`: the Python name the program calls (`alias`), the parameter
shapes the guest checks calls against (`params`, `accepts_extra`), and the text the model and
mypy read (`signature`, `typed_dicts`, `docstring`, `source()`).

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
different definition (or reserved: typing names, tool aliases) gets a suffix `_2`, `_3`, ...;
identical definitions under one name are shared, so `stubs_module` and `describe_tools` print
each once.

Parameters. Required properties come first (schema property order, then names listed only in
`required`), optional ones after. A default is shown as a Python literal; an optional parameter
without a default is shown as `= None` with `| None` added to its type, and
`ParamSpec.omit_if_none` tells the guest to drop an explicit `None` for it when the schema does
not admit null. A property whose name is not an ASCII Python identifier, or is a keyword
(`"content-type"`, `"from"`), is left out of `params`; the signature then ends in
`**kwargs: Any`, `accepts_extra` is True, and the docstring says how to pass it
(`tool(**{"from": ...})`); the host validates it.
"""

from __future__ import annotations

import inspect
import json
import keyword
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

__all__ = [
    "LOSSLESS_MARKER_KEY",
    "MAX_LITERAL_VALUES",
    "NO_DEFAULT",
    "ParamSpec",
    "ToolStub",
    "aliases_for",
    "build_stub",
    "build_stubs",
    "describe_tools",
    "stubs_module",
]

LOSSLESS_MARKER_KEY = "x-codemode-lossless-marker"
"""Marks a branch of an output schema that admits the run's lossless tags (`{"$int": ...}`,
`{"$float": "nan"}`: values JSON would not carry exactly); stubs leave such a branch out of
the return type. MCP results are where the tags arise (`codemode._mcp.values`)."""

NO_DEFAULT: Any = msgspec.UNSET
"""`ParamSpec.default` when the schema gives none; msgspec leaves such a field out when encoding."""

MAX_LITERAL_VALUES = 50
"""An enum with more values than this is typed by its base type (`str`), to keep stubs small."""

# Names the program (or the stubs module) needs for something else: the typing names the stubs
# module imports, the guest's tool entry points (§3), and the builtins a program may call. A tool
# whose name is one of these gets a trailing "_" rather than shadowing it.
_TYPING_NAMES = frozenset({"Any", "Literal", "NotRequired", "TypedDict", "annotations"})
_GUEST_NAMES = frozenset({"tools", "call_tool"})
_BUILTIN_NAMES = frozenset(
    """abs aiter all anext any ascii bin bool breakpoint bytearray bytes callable chr classmethod
    compile complex delattr dict dir divmod enumerate eval exec filter float format frozenset
    getattr globals hasattr hash help hex id input int isinstance issubclass iter len list locals
    map max memoryview min next object oct open ord pow print property range repr reversed round
    set setattr slice sorted staticmethod str sum super tuple type vars zip""".split()
)
_RESERVED_ALIASES = _TYPING_NAMES | _GUEST_NAMES | _BUILTIN_NAMES

_MAX_DEPTH = 32  # schema nesting deeper than this is typed Any

_MODULE_HEADER = '''\
# mypy: disable-error-code="empty-body, assignment"
"""Typed stubs of the tools a program can call. Calling one runs the tool on the host."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict'''


class ParamSpec(msgspec.Struct, frozen=True):
    """One parameter of a tool's Python signature, as the guest checks calls against it.

    Attributes:
        name: the property name, also the Python parameter name (always a non-keyword
            ASCII identifier; other property names only travel through `**kwargs`).
        required: the schema lists it in `required`; a call without it is rejected.
        default: the schema's JSON default, or `NO_DEFAULT`. Informational: the guest leaves an
            omitted argument out and the host applies defaults.
        omit_if_none: the parameter is shown as `= None` only because it is optional: an
            explicit `None` means "not given" and must be dropped, since the schema does not
            admit null.
        annotation: the Python type shown in the signature, e.g. `'list[str] | None'`.
        keyword_only: a property whose name is not a Python name (`"from"`,
            `"content-type"`): passed only as `**{"from": ...}`, never positionally.
    """

    name: str
    required: bool
    default: Any | msgspec.UnsetType = NO_DEFAULT
    omit_if_none: bool = False
    annotation: str = "Any"
    keyword_only: bool = False


class ToolStub(msgspec.Struct, frozen=True):
    """A tool as the program sees it: a typed Python function (docs/design.md §3).

    Attributes:
        name: the tool's own name, what is dispatched ("get-time", "git.status").
        alias: the non-keyword Python identifier the program calls (see `aliases_for`).
        params: in signature order: required first (schema property order), then optional;
            the `keyword_only` ones (names that are not Python names) among them.
        accepts_extra: keyword arguments beyond `params` go to the host (which validates them):
            only when the schema sets `additionalProperties` to something other than false.
            Otherwise such a keyword is Python's `TypeError` ("Did you mean ...?").
        signature: one line, e.g.
            'def get_weather(city: str, units: Literal["c", "f"] = "c") -> GetWeatherResult:'.
        typed_dicts: the TypedDict definitions the signature refers to, in dependency order,
            separated by blank lines; "" when none.
        docstring: the tool's description, trimmed (`inspect.cleandoc`).
        classes: `typed_dicts` as (class name, definition) pairs, for deduplication.
        param_docs: (parameter name, description) for properties that have one.
        extra_note: how to pass properties that are not Python names; "" when none.
    """

    name: str
    alias: str
    params: tuple[ParamSpec, ...]
    accepts_extra: bool
    signature: str
    typed_dicts: str
    docstring: str
    classes: tuple[tuple[str, str], ...] = ()
    param_docs: tuple[tuple[str, str], ...] = ()
    extra_note: str = ""

    def source(self) -> str:
        """A compilable stub: `typed_dicts`, then the function with its docstring and `...`.

        It uses `Any`, `Literal`, `NotRequired` and `TypedDict` without importing them;
        `stubs_module` supplies the imports (and `from __future__ import annotations`).
        """
        return (
            f"{self.typed_dicts}\n\n\n{self._function()}" if self.typed_dicts else self._function()
        )

    def _function(self) -> str:
        doc = self.docstring
        if self.extra_note:
            doc = f"{doc}\n\n{self.extra_note}" if doc else self.extra_note
        if self.param_docs:
            args = "\n".join(f"    {n}: {_one_line(d)}" for n, d in self.param_docs)
            doc = f"{doc}\n\nArgs:\n{args}" if doc else f"Args:\n{args}"
        body = f"{self.signature}\n"
        if doc:
            body += _docstring_block(doc, "    ") + "\n"
        return body + "    ..."


# --------------------------------------------------------------------------- aliases


def aliases_for(names: Iterable[str]) -> dict[str, str]:
    """Map tool names to distinct Python identifiers; the same set of names gives the same map.

    Each character that is not an ASCII letter, digit or "_" becomes "_" ("get-time" ->
    "get_time", "git.status" -> "git_status", "météo" -> "m_t_o"); a leading digit gets a "_"
    prefix; a keyword, or a name the program needs otherwise (a builtin such as `list`,
    `tools`, `call_tool`, the typing names), gets a trailing "_" ("class" -> "class_").
    A name that is already such an identifier maps to itself. The others take their
    identifier in sorted order of the original names, the first free one of `base`,
    `base_2`, `base_3`, ... ("get-time" beside "get_time" -> "get_time_2").

    Raises:
        TypeError: a name is not a str.
    """
    unique = set()
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"tool name must be str, not {type(name).__name__}: {name!r}")
        unique.add(name)
    bases = {name: _identifier(name, _RESERVED_ALIASES) for name in unique}
    result = {name: name for name in unique if bases[name] == name}
    taken = set(result.values())
    for name in sorted(unique - result.keys()):
        alias = _first_free(bases[name], taken)
        taken.add(alias)
        result[name] = alias
    return result


def _identifier(text: str, reserved: frozenset[str] | set[str]) -> str:
    ident = re.sub(r"[^A-Za-z0-9_]", "_", text) or "_"
    if ident[0].isdigit():
        ident = "_" + ident
    if keyword.iskeyword(ident) or ident in reserved:
        ident += "_"
    return ident


def _first_free(base: str, taken: set[str] | Mapping[str, Any]) -> str:
    if base not in taken:
        return base
    n = 2
    while f"{base}_{n}" in taken:
        n += 1
    return f"{base}_{n}"


def _is_name(key: str) -> bool:
    return key.isascii() and key.isidentifier() and not keyword.iskeyword(key)


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
        for key, sub in props.items():
            t = self.type_of(
                sub, tag, f"{path}/properties/{_escape(key)}", base + _camel(key), depth + 1
            )
            fields.append((key, t if key in required else f"NotRequired[{t}]"))
        if all(_is_name(k) and not k.startswith("__") for k, _ in fields):
            lines = [f"class {name}(TypedDict):", *(f"    {k}: {t}" for k, t in fields)]
            text = "\n".join(lines)
        else:
            items = ", ".join(f"{json.dumps(k)}: {t}" for k, t in fields)
            text = f"{name} = TypedDict({json.dumps(name)}, {{{items}}})"
        self.classes[name] = text
        self.class_source[name] = source
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


# --------------------------------------------------------------------------- stubs


def build_stub(
    name: str,
    description: str,
    parameters: dict[str, Any],
    output_schema: dict[str, Any] | None = None,
    *,
    alias: str | None = None,
) -> ToolStub:
    """Build the stub of one tool.

    Args:
        name: the tool's name, dispatched as given.
        description: becomes the docstring (trimmed); may be "".
        parameters: JSON Schema of the arguments, an object (`inputSchema` in MCP). A root
            without properties gives no parameters.
        output_schema: JSON Schema of the result (MCP `outputSchema`), or None: return `Any`.
        alias: the Python name; default `aliases_for([name])[name]`. Must be a non-keyword
            identifier.
    Returns:
        The stub; its TypedDict names are unique only among themselves. To combine stubs in
        one module, build them together with `build_stubs`.
    Raises:
        ValueError: `alias` is not a non-keyword identifier.
    """
    if alias is None:
        alias = aliases_for([name])[name]
    elif not _is_name(alias):
        raise ValueError(f"alias must be a non-keyword ASCII identifier: {alias!r}")
    return _build(name, description, parameters, output_schema, alias, _ClassTable([alias]))


def build_stubs(
    tools: Iterable[tuple[str, str, dict[str, Any], dict[str, Any] | None]],
) -> list[ToolStub]:
    """Build the stubs of several tools, as (name, description, parameters, output_schema).

    Aliases come from `aliases_for` over all names. TypedDict names are unique across the
    result (an identical definition is shared under one name), and neither shadows an alias.
    Names are assigned in sorted order of the tool names, so the result does not depend on
    the input order; it is returned in input order.

    Raises:
        ValueError: two tools have the same name.
    """
    tools = list(tools)
    names = [t[0] for t in tools]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"duplicate tool names: {dupes}")
    aliases = aliases_for(names)
    table = _ClassTable(aliases.values())
    built: dict[str, ToolStub] = {}
    for name, description, parameters, output_schema in sorted(tools, key=lambda t: t[0]):
        built[name] = _build(name, description, parameters, output_schema, aliases[name], table)
    return [built[n] for n in names]


def _build(
    name: str,
    description: str,
    parameters: dict[str, Any] | None,
    output_schema: dict[str, Any] | None,
    alias: str,
    table: _ClassTable,
) -> ToolStub:
    bumps: dict[_Source, int] = {}
    while True:
        conv = _Converter(table, bumps)
        stub = _attempt(conv, name, description, parameters, output_schema, alias)
        conflicts = conv.conflicts()
        if not conflicts:
            table.defs.update(conv.classes)
            return stub
        for source in conflicts:
            bumps[source] = conv.used_index[source] + 1


def _attempt(
    conv: _Converter,
    name: str,
    description: str,
    parameters: dict[str, Any] | None,
    output_schema: dict[str, Any] | None,
    alias: str,
) -> ToolStub:
    prefix = _camel(alias)
    root = parameters if isinstance(parameters, dict) else {}
    conv.roots = {"in": root, "out": output_schema}
    conv.root_base = {"in": prefix + "Arguments", "out": prefix + "Result"}
    obj, obj_path = _arguments_object(root)
    props = obj.get("properties")
    props = props if isinstance(props, dict) else {}
    if _refers_to_root(root):  # the arguments object is a class too: build it first
        conv.type_of(root, "in", "#", conv.root_base["in"])
    required = _required(obj)
    # Python's rules: a keyword beyond the parameters is refused ("Did you mean ...?") unless
    # the schema asks for extra keys explicitly; an absent additionalProperties does not.
    extra_schema = obj.get("additionalProperties", False)
    accepts_extra = extra_schema is not False and "additionalProperties" in obj

    order = [k for k in props if k in required]
    order += [k for k in required if k not in props and k not in order]
    order += [k for k in props if k not in required]
    specs: list[ParamSpec] = []
    sig: list[str] = []
    param_docs: list[tuple[str, str]] = []
    hidden: list[str] = []  # notes on the keys that are not Python names
    hidden_keys: list[str] = []
    for key in order:
        sub = props.get(key, {})
        t = conv.type_of(sub, "in", f"{obj_path}/properties/{_escape(key)}", prefix + _camel(key))
        is_required = key in required
        default: Any = NO_DEFAULT
        shown: str | None = None
        if not is_required and isinstance(sub, dict) and "default" in sub:
            shown = _py_literal(sub["default"])
            if shown is not None:
                default = sub["default"]
        if not _is_name(key):
            note = f"{json.dumps(key)}: {t}" + (" (required)" if is_required else "")
            hidden.append(note)
            hidden_keys.append(key)
            specs.append(ParamSpec(key, is_required, default, False, t, keyword_only=True))
            continue
        omit = False
        if is_required:
            sig.append(f"{key}: {t}")
        elif shown is not None:
            if default is None and not _admits_none(t):
                t = _union([t, "None"])
            sig.append(f"{key}: {t} = {shown}")
        else:
            omit = not _admits_none(t)
            t = _union([t, "None"])
            sig.append(f"{key}: {t} = None")
        specs.append(ParamSpec(key, is_required, default, omit, t))
        if (
            isinstance(sub, dict)
            and isinstance(sub.get("description"), str)
            and sub["description"].strip()
        ):
            param_docs.append((key, sub["description"].strip()))

    extra_note = ""
    if hidden or accepts_extra:
        kwargs = _first_free("kwargs", {s.name for s in specs})
        sig.append(f"**{kwargs}: Any")
    if hidden:
        example = json.dumps(hidden_keys[0])
        extra_note = (
            f"Keys that are not Python names go in **{kwargs}, "
            f"as in {alias}(..., **{{{example}: ...}}): " + "; ".join(hidden) + "."
        )
    returns = "Any"
    if isinstance(output_schema, dict):
        returns = conv.type_of(output_schema, "out", "#", prefix + "Result")
    classes = tuple(conv.classes.items())
    return ToolStub(
        name=name,
        alias=alias,
        params=tuple(specs),
        accepts_extra=accepts_extra,
        signature=f"def {alias}({', '.join(sig)}) -> {returns}:",
        typed_dicts="\n\n\n".join(text for _, text in classes),
        docstring=inspect.cleandoc(description or "").strip(),
        classes=classes,
        param_docs=tuple(param_docs),
        extra_note=extra_note,
    )


# --------------------------------------------------------------------------- output text


def stubs_module(stubs: Sequence[ToolStub]) -> str:
    """A complete Python module of the stubs, which compiles and which mypy checks programs against.

    Layout: a `# mypy:` line (trivial bodies and schema defaults are not errors here), the
    imports (`from __future__ import annotations`, `typing`), every TypedDict once (in order of
    first use), then each stub's function (`source()` without its classes), in the given order.

    Raises:
        ValueError: two stubs share an alias, or define one class name differently (stubs built
            apart with `build_stub`; use `build_stubs`), or a class name equals an alias.
    """
    classes = _collect_classes(stubs)
    aliases = [s.alias for s in stubs]
    dupes = sorted({a for a in aliases if aliases.count(a) > 1})
    if dupes:
        raise ValueError(f"stubs share aliases: {dupes}")
    clash = sorted(set(aliases) & classes.keys())
    if clash:
        raise ValueError(f"class names equal tool aliases: {clash}")
    parts = [_MODULE_HEADER, *classes.values(), *(s._function() for s in stubs)]
    return "\n\n\n".join(parts) + "\n"


def describe_tools(stubs: Sequence[ToolStub], *, max_doc_chars: int = 300) -> str:
    """Compact text that tells the model which functions it can call.

    The TypedDicts come first, each once; then, sorted by alias, each tool's signature with the
    first paragraph of its docstring (whitespace collapsed, cut to `max_doc_chars` characters
    ending in "…") and the note on keys that are not Python names. No JSON Schema is shown.

    Raises:
        ValueError: two stubs define one class name differently.
    """
    ordered = sorted(stubs, key=lambda s: s.alias)
    classes = _collect_classes(ordered)
    blocks = list(classes.values())
    for stub in ordered:
        paragraph = re.split(r"\n\s*\n", stub.docstring, maxsplit=1)[0]
        doc = " ".join(paragraph.split())
        if len(doc) > max_doc_chars:
            doc = doc[: max(max_doc_chars - 1, 0)].rstrip() + "…"
        if stub.extra_note:
            doc = f"{doc}\n{stub.extra_note}" if doc else stub.extra_note
        if doc:
            blocks.append(f"{stub.signature}\n{_docstring_block(doc, '    ')}")
        else:
            blocks.append(f"{stub.signature} ...")
    return "\n\n".join(blocks) + "\n"


def _collect_classes(stubs: Iterable[ToolStub]) -> dict[str, str]:
    classes: dict[str, str] = {}
    for stub in stubs:
        pairs = stub.classes
        if not pairs and stub.typed_dicts:  # a ToolStub made by hand: its text as one unit
            pairs = ((f"<{stub.alias}>", stub.typed_dicts),)
        for name, text in pairs:
            if classes.get(name, text) != text:
                raise ValueError(
                    f"class {name!r} is defined differently by two stubs;"
                    " build them together with build_stubs()"
                )
            classes[name] = text
    return classes


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _docstring_block(text: str, indent: str) -> str:
    """`text` as a triple-quoted string literal at `indent`, escaped so it compiles as is."""

    def escape(m: re.Match[str]) -> str:
        c = m.group()
        return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"

    body = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    body = re.sub("[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]", escape, body)
    if body.endswith('"'):
        body = body[:-1] + '\\"'
    lines = body.split("\n")
    if len(lines) == 1:
        return f'{indent}"""{body}"""'
    rest = [f"{indent}{line}" if line else "" for line in lines[1:]]
    return "\n".join([f'{indent}"""{lines[0]}', *rest, f'{indent}"""'])
