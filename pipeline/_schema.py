"""JSON Schema checks with path-qualified messages (docs/pipeline-spec.md §5).

The validation itself is the `jsonschema` library's (the draft a schema names in
``$schema``, else 2020-12): every keyword it knows, ``$ref`` into ``$defs``/``definitions``
included. This module only compiles schemas once, refuses a schema the library cannot read
(``check_schema``, at registration) and words each violation the same way, whatever tool or
server the schema came from (``<p>`` is the quoted path such as ``"a.b[0]"``, or the root
label)::

    missing required property "file_path"
    "mode" must be one of ["a","b"]
    "x" must be a string            "x" must be a string or null
    "k" is not a declared property (additionalProperties: false)
    "name" must be at most 8 characters long
    arguments must be an object

The schemas most tools declare (`_simple_schema`) are checked in plain Python first, and
`jsonschema` is imported only for a schema outside that subset or a value that does not
fit: only then is there a message to word.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import msgspec

from . import _simple_schema

__all__ = ["argument_problem", "check_schema", "validate"]

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
}

# Compiled validators by schema identity. The entry holds the schema itself, so its id is not
# reused while cached; bounded, since sessions register and drop tools. Likewise whether a
# schema is in the simple subset (`_simple_schema.is_simple`).
_CACHE_SIZE = 4096
_compiled: OrderedDict[int, tuple[Any, Any]] = OrderedDict()
_simple: OrderedDict[int, tuple[Any, Any]] = OrderedDict()
_lock = threading.Lock()


def _by_identity(cache: OrderedDict[int, tuple[Any, Any]], schema: Any,
                 make: Any) -> Any:
    """`make(schema)`, kept in `cache` by the schema's identity (least recently used out)."""
    key = id(schema)
    with _lock:
        hit = cache.get(key)
        if hit is not None and hit[0] is schema:
            cache.move_to_end(key)
            return hit[1]
    made = make(schema)
    with _lock:
        cache[key] = (schema, made)
        if len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)
    return made


def _is_simple(schema: Any) -> bool:
    return bool(_by_identity(_simple, schema, _simple_schema.is_simple))


def _compile(schema: Any) -> Any:
    import jsonschema
    from jsonschema.validators import validator_for

    return validator_for(schema, default=jsonschema.Draft202012Validator)(schema)


def _validator(schema: Any) -> Any:
    return _by_identity(_compiled, schema, _compile)


def check_schema(schema: Any, what: str) -> None:
    """Raise ``ValueError`` if ``schema`` is not a JSON Schema the validator can read.

    Args:
        schema: a JSON Schema (dict or bool).
        what: how to name it in the message, e.g. ``'tool "add": parameters'``.

    Raises:
        ValueError: ``<what> is not a valid JSON Schema: <why> (at <path>)``; also for a
            local ``$ref`` that points nowhere in the schema.
    """
    if not isinstance(schema, (dict, bool)):
        raise ValueError(f"{what} is not a valid JSON Schema: it must be an object or a boolean")
    if _is_simple(schema):          # valid by construction, and holds no $ref
        return
    import jsonschema
    from jsonschema.validators import validator_for
    from referencing import Registry
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012, specification_with

    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)  # type: ignore[arg-type]  # a boolean is a schema too
    except jsonschema.SchemaError as exc:
        where = _dotted(exc.absolute_path)
        raise ValueError(f"{what} is not a valid JSON Schema: {exc.message}"
                         + (f" (at {where})" if where else "")) from None
    resource = specification_with(
        schema.get("$schema", "") if isinstance(schema, dict) else "", default=DRAFT202012,
    ).create_resource(schema)
    resolver = Registry().resolver_with_root(resource)
    for ref in _local_refs(schema):
        try:
            resolver.lookup(ref)
        except Unresolvable:
            raise ValueError(f"{what} is not a valid JSON Schema: "
                             f"$ref {ref!r} points nowhere in the schema") from None


def _local_refs(schema: Any) -> Iterable[str]:
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#"):
                yield ref
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _json(value: Any) -> str:
    try:
        return msgspec.json.encode(value).decode()
    except Exception:
        return repr(value)


def _dotted(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


class _Words:
    """Words jsonschema's errors the way this project's messages read."""

    def __init__(self, label: str) -> None:
        self.label = label

    def where(self, error: Any, extra: Any = None) -> str:
        path = [*error.absolute_path] + ([extra] if extra is not None else [])
        return f'"{_dotted(path)}"' if path else self.label

    def all(self, errors: Iterable[Any]) -> list[str]:
        out: list[str] = []
        for error in errors:
            for line in self.one(error):
                if line not in out:
                    out.append(line)
        return out

    def one(self, error: Any) -> list[str]:
        keyword, expected, value = error.validator, error.validator_value, error.instance
        where = self.where(error)
        if keyword == "required":
            return [f'missing required property "{_dotted([*error.absolute_path, name])}"'
                    for name in expected
                    if isinstance(value, dict) and isinstance(name, str) and name not in value]
        if keyword == "type":
            kinds = [expected] if isinstance(expected, str) else list(expected)
            return [f"{where} must be " + " or ".join(_TYPE_NAMES.get(k, k) for k in kinds)]
        if keyword == "enum":
            return [f"{where} must be one of {_json(expected)}"]
        if keyword == "const":
            return [f"{where} must be {_json(expected)}"]
        if keyword == "additionalProperties" and expected is False:
            return [f'{self.where(error, key)} is not a declared property '
                    "(additionalProperties: false)" for key in _extras(error.schema, value)]
        if keyword in ("anyOf", "oneOf"):
            return self.branches(error)
        if keyword == "minLength":
            return [f"{where} must be at least {expected} characters long"]
        if keyword == "maxLength":
            return [f"{where} must be at most {expected} characters long"]
        if keyword == "pattern":
            return [f"{where} must match the pattern {_json(expected)}"]
        bounds = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">",
                  "exclusiveMaximum": "<"}
        if keyword in bounds:
            return [f"{where} must be {bounds[keyword]} {_json(expected)}"]
        if keyword == "multipleOf":
            return [f"{where} must be a multiple of {_json(expected)}"]
        counts = {"minItems": ("at least", "items"), "maxItems": ("at most", "items"),
                  "minProperties": ("at least", "properties"),
                  "maxProperties": ("at most", "properties")}
        if keyword in counts:
            bound, unit = counts[keyword]
            return [f"{where} must have {bound} {expected} {unit}"]
        if keyword == "items" and expected is False:
            return [f"{where} must have at most {len(error.schema.get('prefixItems', []))} items"]
        if keyword is False or (keyword is None and error.schema is False):
            return [f"{where} is not allowed"]
        if keyword == "uniqueItems":
            return [f"{where} must not contain the same item twice"]
        if keyword == "not":
            return [f"{where} must not match the schema under \"not\""]
        # Other keywords: named, never the value itself (arguments may hold secrets).
        return [f'{where} does not satisfy the schema\'s "{keyword}" rule']

    def branches(self, error: Any) -> list[str]:
        """anyOf/oneOf: the branches the value's type fits; if only one does, its own
        violations; if none, the types the branches allow."""
        by_branch: dict[int, list[Any]] = {}
        for sub in error.context or ():
            by_branch.setdefault(sub.relative_schema_path[0], []).append(sub)
        where = self.where(error)
        if error.validator == "oneOf" and len(by_branch) < len(error.validator_value):
            return [f"{where} must match exactly one of the allowed schemas"]
        fitting = {i: subs for i, subs in by_branch.items()
                   if not any(s.validator == "type" and not s.relative_path for s in subs)}
        if not fitting:
            names: list[str] = []
            for subs in by_branch.values():
                for s in subs:
                    if s.validator == "type" and not s.relative_path:
                        kinds = [s.validator_value] if isinstance(s.validator_value, str) \
                            else list(s.validator_value)
                        names += [n for k in kinds
                                  if (n := _TYPE_NAMES.get(k, k)) not in names]
            return [f"{where} must be {' or '.join(names)}"]
        if len(fitting) == 1:
            return self.all(next(iter(fitting.values())))
        return [f"{where} does not match any of the allowed schemas"]


def _extras(schema: Any, value: Any) -> list[str]:
    if not isinstance(value, dict) or not isinstance(schema, dict):
        return []
    declared = schema.get("properties")
    props: dict[str, Any] = declared if isinstance(declared, dict) else {}
    by_pattern = schema.get("patternProperties")
    patterns: list[str] = list(by_pattern) if isinstance(by_pattern, dict) else []
    return [k for k in value
            if k not in props and not any(re.search(p, k) for p in patterns)]


def validate(schema: Any, value: Any, *, label: str = "value") -> list[str]:
    """Every violation of ``schema`` by ``value`` (empty: valid), worded as above.

    Args:
        schema: a JSON Schema (dict or bool); ``$ref`` resolves against this root. Compiled
            once per schema object.
        value: a JSON value (plain or frozen containers).
        label: how the root is named in messages ("arguments", "value").
    """
    if _is_simple(schema) and _simple_schema.fits(schema, value):
        return []
    try:
        compiled = _validator(schema)
        errors = list(compiled.iter_errors(value))
    except RecursionError:
        return [f"{label} is too deeply nested to validate"]
    except Exception as exc:  # e.g. a $ref the schema cannot resolve
        return [f"{label} cannot be checked against its schema: {exc}"]
    if not errors:
        return []
    # A missing property first at each level, as a reader fixes the call top-down.
    errors.sort(key=lambda e: (len(e.absolute_path), e.validator != "required"))
    return _Words(label).all(errors)


def argument_problem(parameters: Any, arguments: Any) -> str | None:
    """The violations of a call's ``arguments`` joined by ``"; "``, or ``None`` when they fit
    ``parameters``: the one argument check every tool gets (docs/pipeline-spec.md §5)."""
    problems = validate(parameters, arguments, label="arguments")
    return "; ".join(problems) if problems else None
