"""Model-facing Python signatures for tools, derived from their JSON Schemas (docs/design.md §3-4).

Each tool becomes a `ToolStub`: the Python name the program calls (`alias`), the parameter
shapes the guest checks calls against (`params`, `accepts_extra`), and the text the model and
mypy read (`signature`, `typed_dicts`, `docstring`, `source()`).

Types come from the schemas through `schema_types` (the type mapping, TypedDicts and their
class names); `description` prints a set of stubs as the model's listing and as one module.

Parameters. Required properties come first (schema property order, then names listed only in
`required`), optional ones after. A default is shown as a Python literal; an optional parameter
without a default is shown as `= None` with `| None` added to its type, and
`ParamSpec.omit_if_none` tells the guest to drop an explicit `None` for it when the schema does
not admit null. A property named by an identifier is a parameter under that name, non-ASCII
ones included (`météo`), unless NFKC normalization would change it. A property whose name
cannot be written as a parameter (a keyword, `"content-type"`, `"from"`) is a keyword-only
`ParamSpec`: the signature ends in `**kwargs: Any` and the docstring says how to pass it
(`tool(**{"from": ...})`).

Docstring. The tool's description whole, the note on such keys, and an `Args:` section: per
parameter its description and what its schema says beyond the type (format, pattern, bounds,
lengths, long enums, an example), each line bounded (`MAX_PARAM_DOC_CHARS`).
"""

from __future__ import annotations

import inspect
import json
import keyword
import re
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from .schema_types import (
    _TYPING_NAMES,
    LOSSLESS_MARKER_KEY,
    MAX_LITERAL_VALUES,
    MAX_PARAM_DOC_CHARS,
    _accepts,
    _admits_none,
    _arguments_object,
    _camel,
    _ClassTable,
    _Converter,
    _escape,
    _is_name,
    _py_literal,
    _refers_to_root,
    _required,
    _Source,
    _union,
)

__all__ = [
    "LOSSLESS_MARKER_KEY",
    "MAX_LITERAL_VALUES",
    "NO_DEFAULT",
    "ParamSpec",
    "ToolStub",
    "aliases_for",
    "build_stub",
    "build_stubs",
]

NO_DEFAULT: Any = msgspec.UNSET
"""`ParamSpec.default` when the schema gives none; msgspec leaves such a field out when encoding."""

# Names the program (or the stubs module) needs for something else: the typing names the stubs
# module imports, the guest's tool entry points (§3) and discovery functions (`discovery`), and
# the builtins a program may call. A tool whose name is one of these gets a trailing "_" rather
# than shadowing it.
_GUEST_NAMES = frozenset({"tools", "call_tool", "search_tools", "describe", "read_output"})
_BUILTIN_NAMES = frozenset(
    """abs aiter all anext any ascii bin bool breakpoint bytearray bytes callable chr classmethod
    compile complex delattr dict dir divmod enumerate eval exec filter float format frozenset
    getattr globals hasattr hash help hex id input int isinstance issubclass iter len list locals
    map max memoryview min next object oct open ord pow print property range repr reversed round
    set setattr slice sorted staticmethod str sum super tuple type vars zip""".split()
)
_RESERVED_ALIASES = _TYPING_NAMES | _GUEST_NAMES | _BUILTIN_NAMES


class ParamSpec(msgspec.Struct, frozen=True):
    """One parameter of a tool's Python signature, as the guest checks calls against it.

    Attributes:
        name: the property name, also the Python parameter name unless `keyword_only`.
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
        param_docs: (parameter name, line) for the properties with something to say: the
            description, then what the schema says the value accepts beyond its type
            (format, pattern, bounds, lengths, an enum too long for `Literal`, a default the
            signature cannot show, an example); a name that is not a Python name is quoted.
        extra_note: how to pass properties that are not Python names; "" when none.
        group: the toolset the tool comes from (`ToolDefinition.group`: an MCP server's
            name), which a description's index groups by; "" when none.
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
    group: str = ""

    def source(self) -> str:
        """A compilable stub: `typed_dicts`, then the function with its docstring and `...`.

        It uses `Any`, `Literal`, `NotRequired` and `TypedDict` without importing them;
        `stubs_module` supplies the imports (and `from __future__ import annotations`).
        """
        return (
            f"{self.typed_dicts}\n\n\n{self._function()}" if self.typed_dicts else self._function()
        )

    def doc_text(self, max_doc_chars: int | None = None) -> str:
        """The stub's whole docstring text: the tool's description, the note on keys that
        are not Python names, and an `Args:` section with a line per parameter that has a
        description or schema facts (`param_docs`), each part after a blank line.

        Args:
            max_doc_chars: cut the tool's description (not the note or `Args:`) to this
                many characters, marked `[… N more characters]`; None: whole.
        Returns:
            The text, "" when there is nothing to say.
        """
        doc = self.docstring
        if max_doc_chars is not None and len(doc) > max_doc_chars:
            kept = doc[: max(max_doc_chars, 0)].rstrip()
            doc = f"{kept} [… {len(doc) - len(kept)} more characters]"
        parts = [doc] if doc else []
        if self.extra_note:
            parts.append(self.extra_note)
        if self.param_docs:
            parts.append("Args:\n" + "\n".join(f"    {n}: {d}" for n, d in self.param_docs))
        return "\n\n".join(parts)

    def _function(self) -> str:
        doc = self.doc_text()
        body = f"{self.signature}\n"
        if doc:
            body += _docstring_block(doc, "    ") + "\n"
        return body + "    ..."


# --------------------------------------------------------------------------- aliases


def aliases_for(names: Iterable[str]) -> dict[str, str]:
    """Map tool names to distinct Python identifiers; the same set of names gives the same map.

    Each character that is not an ASCII letter, digit or "_" becomes "_" ("get-time" ->
    "get_time", "git.status" -> "git_status", "météo" -> "m_t_o"); leading "_"s are dropped
    and a leading digit gets a "tool_" prefix ("_private" -> "private", "2fa" -> "tool_2fa"),
    so that every tier can call the alias (the restricted tier refuses names that start with
    "_"); a keyword, or a name the program needs otherwise (a builtin such as `list`,
    `tools`, `call_tool`, `search_tools`, `describe`, `read_output`, the typing names),
    gets a trailing "_" ("class" -> "class_").
    A name that is already such an identifier, not starting with "_", maps to itself. The
    others take their identifier in sorted order of the original names, the first free one
    of `base`, `base_2`, `base_3`, ... ("get-time" beside "get_time" -> "get_time_2").

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
    ident = re.sub(r"[^A-Za-z0-9_]", "_", text).lstrip("_") or "tool"
    if ident[0].isdigit():
        ident = "tool_" + ident
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
    elif not (alias.isascii() and _is_name(alias)):
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
            for shape, class_name in conv.shapes.items():
                table.shapes.setdefault(shape, class_name)
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
        # The signature shows the default of a parameter, not of a key in **kwargs.
        line = _param_line(sub, shown_default=is_required or (shown is not None
                                                               and _is_name(key)))
        if not _is_name(key):
            note = f"{_key_text(key)}: {t}" + (" (required)" if is_required else "")
            hidden.append(note)
            hidden_keys.append(key)
            specs.append(ParamSpec(key, is_required, default, False, t, keyword_only=True))
            if line:
                param_docs.append((_key_text(key), line))
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
        if line:
            param_docs.append((key, line))

    extra_note = ""
    if hidden or accepts_extra:
        kwargs = _first_free("kwargs", {s.name for s in specs})
        sig.append(f"**{kwargs}: Any")
    if hidden:
        example = _key_text(hidden_keys[0])
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


def _param_line(schema: Any, *, shown_default: bool) -> str:
    """A parameter's line in `Args:`: its description (whitespace collapsed), then in
    parentheses what its schema says it accepts beyond the type (`schema_types._accepts`);
    "" when there is neither. Cut to `MAX_PARAM_DOC_CHARS`, ending in "…"."""
    if not isinstance(schema, dict):
        return ""
    described = schema.get("description")
    text = " ".join(described.split()) if isinstance(described, str) else ""
    facts = _accepts(schema, shown_default=shown_default)
    if facts:
        text = f"{text} ({'; '.join(facts)})" if text else "; ".join(facts)
    if len(text) > MAX_PARAM_DOC_CHARS:
        text = text[: MAX_PARAM_DOC_CHARS - 1].rstrip() + "…"
    return text


def _key_text(key: str) -> str:
    """A property name as a str literal in the text a model reads: characters as they are
    (`"météo"`, not `"m\\u00e9t\\u00e9o"`), escapes only where a literal needs them."""
    return _py_literal(key) or json.dumps(key)


def _docstring_block(text: str, indent: str) -> str:
    """`text` as a triple-quoted string literal at `indent` that compiles to `text`: raw
    (`r\"""`) when it has backslashes a raw literal can hold, so a pattern reads as written
    (`^\\d{2}:\\d{2}$`), else escaped."""

    def escape(m: re.Match[str]) -> str:
        c = m.group()
        return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"

    prefix = ""
    if "\\" in text and not _NOT_RAW.search(text):
        prefix, body = "r", text
    else:
        body = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
        body = _ESCAPED.sub(escape, body)
        if body.endswith('"'):
            body = body[:-1] + '\\"'
    lines = body.split("\n")
    if len(lines) == 1:
        return f'{indent}{prefix}"""{body}"""'
    rest = [f"{indent}{line}" if line else "" for line in lines[1:]]
    return "\n".join([f'{indent}{prefix}"""{lines[0]}', *rest, f'{indent}"""'])


_ESCAPED = re.compile("[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]")
# What a raw literal cannot hold: characters that need escapes, a closing quote run, or an
# ending in a backslash or quote.
_NOT_RAW = re.compile('[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]|"""|[\\\\"]\\Z')
