"""A typed tool's value converted to JSON at any depth, as its output schema says; a return
annotation that cannot be converted refused when the tool is defined (pipeline/_convert.py,
docs/pipeline.md "Tools")."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from collections.abc import Iterator
from typing import Annotated, Any, NamedTuple, TypedDict

import attrs
import msgspec
import pytest

from codemode.pipeline import Session, tool, validate

from conftest import inp


class Severity(enum.Enum):
    LOW = "low"
    HIGH = "high"


@dataclasses.dataclass
class Issue:
    id: int
    title: str
    severity: Severity
    opened: datetime.datetime
    labels: tuple[str, ...] = ()


class Comment(msgspec.Struct):
    author: str
    at: datetime.date


@attrs.define
class Owner:
    name: str
    key: uuid.UUID


class Span(NamedTuple):
    start: int
    end: int


class Page(TypedDict):
    issues: list[Issue]
    comments: dict[str, list[Comment]]


OPENED = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
ISSUES = [Issue(1, "crash", Severity.HIGH, OPENED, ("bug", "p1")),
          Issue(2, "typo", Severity.LOW, OPENED)]
ISSUES_JSON = [
    {"id": 1, "title": "crash", "severity": "high", "opened": "2024-01-02T03:04:05Z",
     "labels": ["bug", "p1"]},
    {"id": 2, "title": "typo", "severity": "low", "opened": "2024-01-02T03:04:05Z",
     "labels": []},
]


async def test_a_list_of_dataclasses_is_converted_and_matches_the_declared_schema():
    ran = []

    @tool
    def list_issues() -> list[Issue]:
        ran.append(1)                       # the side effect happens once, and succeeds
        return ISSUES

    session = Session(tools=[list_issues])
    result = await session.execute(inp("list_issues"))
    assert not result.is_error, result.text
    assert result.value == ISSUES_JSON and ran == [1]
    assert validate(list_issues.output_schema, result.value) == []


async def test_structs_attrs_named_tuples_and_mappings_of_them_are_converted_at_any_depth():
    key = uuid.UUID(int=7)

    @tool
    def page() -> Page:
        return {"issues": ISSUES[:1],
                "comments": {"1": [Comment("ada", datetime.date(2024, 5, 6))]}}

    @tool
    async def owners() -> dict[str, list[Owner]]:
        return {"core": [Owner("ada", key)]}

    @tool
    def spans() -> list[Span]:
        return [Span(1, 2), Span(3, 4)]

    @tool
    def by_number() -> dict[int, Severity]:
        return {1: Severity.HIGH}

    session = Session(tools=[page, owners, spans, by_number])
    got = {name: (await session.execute(inp(name))) for name in
           ("page", "owners", "spans", "by_number")}
    assert {n: r.error for n, r in got.items() if r.is_error} == {}
    assert got["page"].value == {"issues": ISSUES_JSON[:1],
                                 "comments": {"1": [{"author": "ada", "at": "2024-05-06"}]}}
    assert got["owners"].value == {"core": [{"name": "ada", "key": str(key)}]}
    assert got["spans"].value == [[1, 2], [3, 4]]
    assert got["by_number"].value == {"1": "high"}


async def test_an_unannotated_tool_and_a_raw_definition_without_a_converter():
    from conftest import make_tool

    @tool
    def loose():                            # no annotation: any JSON, converted all the same
        return {"issues": ISSUES}

    raw = make_tool("raw", lambda args, ctx: ISSUES)   # a raw ToolDefinition converts nothing
    session = Session(tools=[loose, raw])
    assert (await session.execute(inp("loose"))).value == {"issues": ISSUES_JSON}
    failed = await session.execute(inp("raw"))
    assert failed.error.message == ('tool "raw" returned invalid output: value must be '
                                    'losslessly JSON-serializable: unsupported type Issue at $[0]')


@dataclasses.dataclass
class Score:
    value: float


class Opaque:
    pass


async def test_conversion_keeps_the_lossless_rules_and_names_what_it_cannot_convert():
    @tool
    def score() -> list[Score]:
        return [Score(1.5), Score(float("nan"))]

    @tool
    def opaque() -> Any:
        return [Opaque()]

    session = Session(tools=[score, opaque])
    nan = await session.execute(inp("score"))
    assert nan.error.message == (
        'tool "score" returned invalid output: value must be losslessly JSON-serializable: '
        'non-finite number at $[1].value')
    bad = await session.execute(inp("opaque"))
    assert bad.error.code == "INVALID_TOOL_OUTPUT"
    assert bad.error.message == ('tool "opaque" returned invalid output: value could not be '
                                 'converted to JSON: Encoding objects of type Opaque is '
                                 'unsupported')


async def test_a_converted_value_is_still_held_to_the_output_schema():
    @tool
    def liar() -> list[Issue]:
        return [Comment("ada", datetime.date(2024, 5, 6))]  # type: ignore[list-item]

    result = await Session(tools=[liar]).execute(inp("liar"))
    assert result.error.code == "INVALID_TOOL_OUTPUT"
    assert 'missing required property "[0].id"' in result.error.message


class Plain:
    def __init__(self, x: int) -> None:
        self.x = x


@dataclasses.dataclass
class Holder:
    inner: list[Plain]


@pytest.mark.parametrize(("annotation", "shown", "culprit"), [
    (Plain, "Plain", "Plain"),
    (list[Plain], "list[Plain]", "Plain"),
    (dict[str, Holder], "dict[str, Holder]", "Plain"),
    (object, "object", "object"),
    (Iterator[int], "Iterator[int]", "Iterator"),
    # msgspec can describe it (the schema given), but not encode it
    (Annotated[Plain, msgspec.Meta(extra_json_schema={"type": "string"})],
     "Annotated[Plain, Meta(", "Plain"),
])
def test_a_return_annotation_msgspec_cannot_convert_is_refused_when_the_tool_is_defined(
        annotation, shown, culprit):
    ran = []

    def get_items() -> None:
        ran.append(1)

    get_items.__annotations__["return"] = annotation
    with pytest.raises(TypeError) as caught:
        tool(get_items)
    message = str(caught.value)
    assert message.startswith(f"@tool get_items: the return annotation {shown}")
    assert f"cannot be converted to JSON: type {culprit} is not supported" in message
    assert ran == []


@dataclasses.dataclass
class Tree:
    name: str
    children: list[Tree]


async def test_a_recursive_dataclass_annotation_is_accepted_and_converted():
    @tool
    def tree() -> Tree:
        return Tree("root", [Tree("leaf", [])])

    result = await Session(tools=[tree]).execute(inp("tree"))
    assert result.value == {"name": "root", "children": [{"name": "leaf", "children": []}]}


async def test_a_value_that_cannot_be_converted_fails_as_invalid_output_wherever_it_is():
    @tool
    def top() -> Any:
        return Opaque()

    @tool
    def nested() -> Any:
        return {"x": [Opaque()]}

    session = Session(tools=[top, nested])
    for name in ("top", "nested"):
        result = await session.execute(inp(name))
        assert (result.error.code, result.error.message) == (
            "INVALID_TOOL_OUTPUT", f'tool "{name}" returned invalid output: value could not be '
                                   'converted to JSON: Encoding objects of type Opaque is '
                                   'unsupported')
