"""The plain-Python check of simple schemas (`pipeline._simple_schema`) never disagrees with
`jsonschema` where it answers: every schema it calls simple is valid, every value it accepts
is valid, and whatever it does not accept still gets jsonschema's own messages."""

import subprocess
import sys

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.pipeline import _schema, _simple_schema
from codemode.pipeline._lossless import FrozenDict, FrozenList

TYPES = ["string", "integer", "number", "boolean", "object", "array", "null"]
NAMES = st.sampled_from(["a", "b", "c", "d"])

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=3)
    | st.sampled_from(["c", "f", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=12)


def _schema_with(children: st.SearchStrategy) -> st.SearchStrategy:
    kind = st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3,
                                             unique=True)
    keywords = st.fixed_dictionaries({}, optional={
        "type": kind,
        "properties": st.dictionaries(NAMES, children, max_size=3),
        "required": st.lists(NAMES, max_size=3, unique=True),
        "additionalProperties": st.booleans() | children,
        "items": st.booleans() | children,
        "enum": st.lists(st.none() | st.sampled_from(["c", "f", "", "a"]), max_size=3),
        "default": JSON,
        "title": st.text(max_size=3),
        "description": st.text(max_size=3),
    })
    return keywords


SIMPLE = st.recursive(_schema_with(st.just({})), _schema_with, max_leaves=8)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SIMPLE, JSON)
def test_a_simple_schema_is_valid_and_a_value_it_accepts_is_valid(schema, value):
    assert _simple_schema.is_simple(schema)
    jsonschema.Draft202012Validator.check_schema(schema)
    if _simple_schema.fits(schema, value):
        assert jsonschema.Draft202012Validator(schema).is_valid(value)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SIMPLE, JSON)
def test_validate_gives_jsonschemas_own_verdict_and_messages(schema, value):
    expected = jsonschema.Draft202012Validator(schema).is_valid(value)
    problems = _schema.validate(schema, value, label="arguments")
    assert (problems == []) == expected


@pytest.mark.parametrize("schema", [
    True, False, {"$schema": "https://json-schema.org/draft/2020-12/schema"},
    {"type": "strin"}, {"type": []}, {"type": ["string", "string"]}, {"type": None},
    {"required": ["a", "a"]}, {"required": "a"}, {"properties": {"a": True}},
    {"properties": {"a": {"$ref": "#/$defs/x"}}}, {"pattern": "^a"}, {"enum": [1]},
    {"enum": "c"}, {"title": 3}, {"items": {"minimum": 0}}, {"additionalProperties": None},
    {"properties": {"a": {"format": "email"}}},
])
def test_anything_outside_the_subset_is_left_to_jsonschema(schema):
    assert not _simple_schema.is_simple(schema)


@pytest.mark.parametrize("schema, value", [
    ({"type": "integer"}, 1.0),           # jsonschema's verdict depends on the draft
    ({"type": "integer"}, True), ({"type": "number"}, False),
    ({"type": "object"}, {1: "a"}),
    ({"enum": ["c"]}, FrozenList(["c"])), ({"required": ["a"]}, {"b": 1}),
    ({"additionalProperties": False, "properties": {"a": {}}}, {"b": 1}),
    ({"items": False}, [1]), ({"items": {"type": "string"}}, ["a", 1]),
])
def test_a_value_it_cannot_vouch_for_goes_to_jsonschema(schema, value):
    assert not _simple_schema.fits(schema, value)


def test_frozen_containers_are_objects_and_arrays():
    schema = {"type": "object", "properties": {"xs": {"type": "array",
                                                      "items": {"type": "string"}}}}
    assert _simple_schema.fits(schema, FrozenDict({"xs": FrozenList(["a"])}))


def test_a_schema_nested_past_the_recursion_limit_is_left_to_jsonschema():
    schema: dict = {"type": "string"}
    for _ in range(sys.getrecursionlimit() + 10):
        schema = {"items": schema}
    assert not _simple_schema.is_simple(schema)


def test_violations_are_still_worded_by_jsonschema():
    schema = {"type": "object", "properties": {"city": {"type": "string"}},
              "required": ["city"], "additionalProperties": False}
    assert _schema.validate(schema, {"city": 3, "x": 1}, label="arguments") == [
        '"x" is not a declared property (additionalProperties: false)',
        '"city" must be a string',
    ]
    assert _schema.validate(schema, {}, label="arguments") == [
        'missing required property "city"']


def _modules_after(statement: str) -> set[str]:
    probe = f"{statement}\nimport sys\nprint(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    return set(out.split())


def test_registering_and_calling_simple_tools_does_not_import_jsonschema():
    loaded = _modules_after(
        "import asyncio\n"
        "from codemode.pipeline import Session\n"
        "from codemode.fixtures.toolset import builtin_tools\n"
        "s = Session(tools=builtin_tools(), log=None)\n"
        "r = asyncio.run(s.call('add', {'a': 1, 'b': 2}))\n"
        "assert r.value == 3, r")
    assert "jsonschema" not in loaded


def test_a_call_that_does_not_fit_imports_jsonschema_for_its_message():
    loaded = _modules_after(
        "import asyncio\n"
        "from codemode.pipeline import Session\n"
        "from codemode.fixtures.toolset import builtin_tools\n"
        "s = Session(tools=builtin_tools(), log=None)\n"
        "r = asyncio.run(s.call('add', {'a': 'x', 'b': 2}))\n"
        "assert r.is_error and '\"a\" must be a number' in r.text, r.text")
    assert "jsonschema" in loaded
