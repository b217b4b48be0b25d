"""The JSON Schemas most tools declare, checked without the `jsonschema` library.

A tool's parameters are nearly always an object of named, typed properties (what `@tool`
derives from a signature, what most MCP servers send). For a schema built only of the
keywords below, `is_simple` says so, and `fits` answers whether a value is valid in plain
Python (~1 us a property), so neither registering nor calling such a tool imports
`jsonschema` (~50 ms in a new process) or walks its validator. Anything else, and every
value `fits` does not accept, goes to `jsonschema` (`pipeline._schema`), which words the
violations: this module only ever says "valid", never why not, so it cannot change a
message, only skip the library when there is none to give.

The subset (draft 2020-12, the default draft; no ``$schema``): an object schema with only
``type`` (one of the seven type names, or a non-empty list of distinct ones), ``properties``
(names to subset schemas), ``required`` (distinct strings), ``additionalProperties`` (a
boolean or a subset schema), ``items`` (a boolean or a subset schema), ``enum`` (strings
and nulls), ``default`` (anything), ``title`` and ``description`` (strings). Each of these
is well-formed under the 2020-12 meta-schema by construction, so a simple schema is a
valid one (`check_schema` needs no library either).
"""

from __future__ import annotations

from typing import Any

__all__ = ["fits", "is_simple"]

_TYPES = frozenset({"string", "integer", "number", "boolean", "object", "array", "null"})
_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items",
                       "enum", "default", "title", "description"})


def is_simple(schema: Any) -> bool:
    """Whether `schema` is in the subset (module docstring), at every level."""
    try:
        return _simple(schema)
    except RecursionError:          # nested past the interpreter's limit: not "simple"
        return False


def _simple(schema: Any) -> bool:
    if type(schema) is not dict or not schema.keys() <= _KEYWORDS:
        return False
    kind = schema.get("type")
    if kind is not None and not (
            (type(kind) is str and kind in _TYPES)
            or (type(kind) is list and kind and len(set(kind)) == len(kind)
                and all(type(k) is str and k in _TYPES for k in kind))):
        return False
    if "type" in schema and kind is None:
        return False
    for key in ("title", "description"):
        if key in schema and type(schema[key]) is not str:
            return False
    properties = schema.get("properties", {})
    if type(properties) is not dict or not all(
            type(name) is str and _simple(sub) for name, sub in properties.items()):
        return False
    required = schema.get("required", [])
    if type(required) is not list or not all(type(name) is str for name in required) \
            or len(set(required)) != len(required):
        return False
    for key in ("additionalProperties", "items"):
        if key in schema and not (type(schema[key]) is bool or _simple(schema[key])):
            return False
    enum = schema.get("enum", [])
    return type(enum) is list and all(e is None or type(e) is str for e in enum)


def fits(schema: dict[str, Any], value: Any) -> bool:
    """True when `value` is valid under the simple `schema` (`is_simple`); False when it is
    not, or when this module cannot be sure (a float for "integer", a number that is
    neither int nor float, a key that is not a string, a value nested too deep): the caller
    then asks `jsonschema`."""
    try:
        return _fits(schema, value)
    except RecursionError:
        return False


def _type_fits(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int)
    return isinstance(value, (int, float))          # "number"


def _fits(schema: dict[str, Any], value: Any) -> bool:
    kind = schema.get("type")
    if kind is not None and not (_type_fits(kind, value) if type(kind) is str
                                 else any(_type_fits(k, value) for k in kind)):
        return False
    if "enum" in schema and not any(value == e and type(value) is type(e)
                                    for e in schema["enum"]):
        return False
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        if not all(name in value for name in schema.get("required", ())):
            return False
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if type(key) is not str:
                return False
            sub = properties.get(key)
            if sub is not None:
                if not _fits(sub, item):
                    return False
            elif extra is False or (extra is not True and not _fits(extra, item)):
                return False
    elif isinstance(value, list):
        items = schema.get("items", True)
        if items is False:
            return not value
        if items is not True and not all(_fits(items, item) for item in value):
            return False
    return True
