"""A small JSON Schema validator with path-qualified messages (docs/pipeline-spec.md §5).

Supports the subset that msgspec emits and hand-written tool schemas use: ``$ref`` into
``$defs``/``definitions``, ``type`` (string or list), ``enum``, ``const``, ``properties``,
``required``, ``additionalProperties`` (bool or schema), ``items``, ``prefixItems``,
``minItems``/``maxItems``, ``minLength``/``maxLength``, ``pattern``, ``minimum``/``maximum``,
``exclusiveMinimum``/``exclusiveMaximum``, ``multipleOf``, ``minProperties``/``maxProperties``,
``anyOf``/``oneOf`` (both: at least one branch), ``allOf``. Other keywords are ignored.

Messages (``<p>`` is the quoted path such as ``"a.b[0]"``, or the root label)::

    missing required property "file_path"
    "mode" must be one of ["a","b"]
    "x" must be a string            "x" must be a string or null
    "k" is not a declared property (additionalProperties: false)
    arguments must be an object
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

__all__ = ["validate"]

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
}


def _is_type(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "null":
        return value is None
    return True  # unknown type keyword: do not reject


def _json(value: Any) -> str:
    try:
        return msgspec.json.encode(value).decode()
    except Exception:
        return repr(value)


def _equal(a: Any, b: Any) -> bool:
    # JSON equality: True != 1
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


class _Validator:
    def __init__(self, root: Any, label: str) -> None:
        self.root = root
        self.label = label
        self.errors: list[str] = []

    def where(self, path: list[Any]) -> str:
        if not path:
            return self.label
        return f'"{self.dotted(path)}"'

    @staticmethod
    def dotted(path: list[Any]) -> str:
        out = ""
        for part in path:
            if isinstance(part, int):
                out += f"[{part}]"
            else:
                out += f".{part}" if out else str(part)
        return out

    def resolve(self, schema: Any) -> Any:
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema and seen < 64:
            ref = schema["$ref"]
            target: Any = self.root
            if not isinstance(ref, str) or not ref.startswith("#"):
                return {}
            for part in ref[1:].split("/"):
                if part:
                    target = target.get(part, {}) if isinstance(target, dict) else {}
            schema = target
            seen += 1
        return schema

    def types_of(self, schema: Any) -> list[str] | None:
        schema = self.resolve(schema)
        if not isinstance(schema, dict):
            return None
        kind = schema.get("type")
        if isinstance(kind, str):
            return [kind]
        if isinstance(kind, list):
            return [k for k in kind if isinstance(k, str)]
        if "enum" in schema or "const" in schema:
            return None
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list):
                out: list[str] = []
                for branch in schema[key]:
                    kinds = self.types_of(branch)
                    if kinds is None:
                        return None
                    out += [k for k in kinds if k not in out]
                return out
        return None

    def check(self, schema: Any, value: Any, path: list[Any]) -> None:
        schema = self.resolve(schema)
        if schema is True or schema == {} or not isinstance(schema, dict):
            if schema is False:
                self.errors.append(f"{self.where(path)} is not allowed")
            return
        where = self.where(path)
        kinds = schema.get("type")
        if kinds is not None:
            kinds_list = [kinds] if isinstance(kinds, str) else list(kinds)
            if not any(_is_type(value, k) for k in kinds_list):
                names = " or ".join(_TYPE_NAMES.get(k, k) for k in kinds_list)
                self.errors.append(f"{where} must be {names}")
                return
        options = schema.get("enum")
        if isinstance(options, list) and not any(_equal(value, o) for o in options):
            self.errors.append(f"{where} must be one of {_json(options)}")
            return
        if "const" in schema and not _equal(value, schema["const"]):
            self.errors.append(f"{where} must be {_json(schema['const'])}")
            return
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list):
                self.check_any(schema[key], value, path)
        if isinstance(schema.get("allOf"), list):
            for branch in schema["allOf"]:
                self.check(branch, value, path)
        if isinstance(value, str):
            self.check_string(schema, value, where)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self.check_number(schema, value, where)
        elif isinstance(value, dict):
            self.check_object(schema, value, path)
        elif isinstance(value, list):
            self.check_array(schema, value, path)

    def check_any(self, branches: list[Any], value: Any, path: list[Any]) -> None:
        compatible = []
        for branch in branches:
            kinds = self.types_of(branch)
            if kinds is None or any(_is_type(value, k) for k in kinds):
                compatible.append(branch)
        if not compatible:
            names: list[str] = []
            for branch in branches:
                for k in self.types_of(branch) or []:
                    if _TYPE_NAMES.get(k, k) not in names:
                        names.append(_TYPE_NAMES.get(k, k))
            self.errors.append(f"{self.where(path)} must be {' or '.join(names)}")
            return
        first_errors: list[str] | None = None
        for branch in compatible:
            sub = _Validator(self.root, self.label)
            sub.check(branch, value, path)
            if not sub.errors:
                return
            if first_errors is None:
                first_errors = sub.errors
        if len(compatible) == 1 and first_errors:
            self.errors.extend(first_errors)
        else:
            self.errors.append(f"{self.where(path)} does not match any of the allowed schemas")

    def check_string(self, schema: dict[str, Any], value: str, where: str) -> None:
        if isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
            self.errors.append(f"{where} must be at least {schema['minLength']} characters long")
        if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
            self.errors.append(f"{where} must be at most {schema['maxLength']} characters long")
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            try:
                matched = re.search(pattern, value) is not None
            except re.error:
                matched = True
            if not matched:
                self.errors.append(f"{where} must match the pattern {_json(pattern)}")

    def check_number(self, schema: dict[str, Any], value: float, where: str) -> None:
        def num(key: str) -> float | None:
            bound = schema.get(key)
            return (
                bound if isinstance(bound, (int, float)) and not isinstance(bound, bool) else None
            )

        if (b := num("minimum")) is not None and value < b:
            self.errors.append(f"{where} must be >= {_json(b)}")
        if (b := num("maximum")) is not None and value > b:
            self.errors.append(f"{where} must be <= {_json(b)}")
        if (b := num("exclusiveMinimum")) is not None and value <= b:
            self.errors.append(f"{where} must be > {_json(b)}")
        if (b := num("exclusiveMaximum")) is not None and value >= b:
            self.errors.append(f"{where} must be < {_json(b)}")
        if (b := num("multipleOf")) is not None and b > 0:
            quotient = value / b
            if quotient != int(quotient):
                self.errors.append(f"{where} must be a multiple of {_json(b)}")

    def check_object(self, schema: dict[str, Any], value: dict[str, Any], path: list[Any]) -> None:
        props_raw = schema.get("properties")
        props: dict[str, Any] = props_raw if isinstance(props_raw, dict) else {}
        required_raw = schema.get("required")
        required: list[Any] = required_raw if isinstance(required_raw, list) else []
        for name in required:
            if isinstance(name, str) and name not in value:
                self.errors.append(f'missing required property "{self.dotted([*path, name])}"')
        for key, child in value.items():
            if key in props:
                self.check(props[key], child, [*path, key])
                continue
            extra = schema.get("additionalProperties", True)
            if extra is False:
                self.errors.append(
                    f'"{self.dotted([*path, key])}" is not a declared property '
                    "(additionalProperties: false)"
                )
            elif isinstance(extra, dict):
                self.check(extra, child, [*path, key])
        where = self.where(path)
        if isinstance(schema.get("minProperties"), int) and len(value) < schema["minProperties"]:
            self.errors.append(f"{where} must have at least {schema['minProperties']} properties")
        if isinstance(schema.get("maxProperties"), int) and len(value) > schema["maxProperties"]:
            self.errors.append(f"{where} must have at most {schema['maxProperties']} properties")

    def check_array(self, schema: dict[str, Any], value: list[Any], path: list[Any]) -> None:
        where = self.where(path)
        prefix_raw = schema.get("prefixItems")
        prefix: list[Any] = prefix_raw if isinstance(prefix_raw, list) else []
        items = schema.get("items", True)
        for index, child in enumerate(value):
            if index < len(prefix):
                self.check(prefix[index], child, [*path, index])
            elif items is False:
                self.errors.append(f"{where} must have at most {len(prefix)} items")
                break
            elif isinstance(items, dict):
                self.check(items, child, [*path, index])
        if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
            self.errors.append(f"{where} must have at least {schema['minItems']} items")
        if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
            self.errors.append(f"{where} must have at most {schema['maxItems']} items")


def validate(schema: Any, value: Any, *, label: str = "value") -> list[str]:
    """Every violation of ``schema`` by ``value``, in document order (empty: valid).

    Args:
        schema: a JSON Schema (dict or bool); ``$ref`` resolves against this root.
        value: a JSON value (plain or frozen containers).
        label: how the root is named in messages ("arguments", "value").
    """
    validator = _Validator(schema, label)
    try:
        validator.check(schema, value, [])
    except RecursionError:
        validator.errors.append(f"{label} is too deeply nested to validate")
    return validator.errors
