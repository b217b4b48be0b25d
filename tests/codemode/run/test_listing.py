"""What the model reads of each tool: the docstring whole, an `Args:` line per parameter with
what its schema says it accepts, each shape once, names as a model writes them."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from codemode import CodeMode, McpServer, Session
from codemode._run.description import describe_tools, stubs_module
from codemode._run.stubs import build_stub
from tests.conftest import git_server


def obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or []}


STR: dict[str, Any] = {"type": "string"}

# What real servers put in their schemas (pydantic's shapes: a nullable union with a
# default of null, a title on every property).
BOOKING = obj({
    "room": {**STR, "title": "Room", "description": "Room name, as on the door."},
    "start": {**STR, "pattern": r"^\d{2}:\d{2}$", "description": "Start time, HH:MM."},
    "day": {"anyOf": [{**STR, "format": "date"}, {"type": "null"}], "default": None},
    "seats": {"type": "integer", "minimum": 1, "maximum": 40, "default": 2},
    "ratio": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5},
    "code": {**STR, "minLength": 4, "maxLength": 4, "examples": ["AB12"]},
    "guests": {"type": "array", "items": STR, "maxItems": 5, "uniqueItems": True},
    "floor": {**STR, "enum": [f"F{i}" for i in range(60)], "deprecated": True},
    "from": {**STR, "description": "Who books.", "minLength": 1},
}, ["room", "start"])


def test_the_listing_says_what_each_parameter_accepts():
    stub = build_stub("book_room", "Book a room.\n\nThe second paragraph stays.", BOOKING)
    assert describe_tools([stub]) == textwrap.dedent('''\
        def book_room(room: str, start: str, day: str | None = None, seats: int = 2, ratio: float | None = None, code: str | None = None, guests: list[str] | None = None, floor: str | None = None, **kwargs: Any) -> Any:
            r"""Book a room.

            The second paragraph stays.

            Keys that are not Python names go in **kwargs, as in book_room(..., **{"from": ...}): "from": str.

            Args:
                room: Room name, as on the door.
                start: Start time, HH:MM. (pattern ^\\d{2}:\\d{2}$)
                day: format date
                seats: >= 1; <= 40
                ratio: > 0; multiple of 0.5
                code: exactly 4 characters; e.g. "AB12"
                guests: at most 5 items; unique items
                floor: deprecated; one of "F0", "F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F9", "F10", "F11", "F12", "F13", "F14", "F15", "F16", "F17", "F18", "F19" and 40 more
                "from": Who books. (at least 1 character)
            """
        ''')  # noqa: E501  (generated stub text, compared verbatim)
    # The stubs module a checker reads carries the same docstring, and compiles to it.
    ns: dict[str, Any] = {}
    exec(compile(stubs_module([stub]), "tools_stubs.py", "exec"), ns)
    assert "start: Start time, HH:MM. (pattern ^\\d{2}:\\d{2}$)" in ns["book_room"].__doc__


def test_a_long_description_is_cut_and_marked_and_a_long_parameter_line_too():
    long_param = obj({"q": {**STR, "description": "word " * 200}})
    stub = build_stub("find", "First.\n\n" + "x" * 3000, long_param)
    text = describe_tools([stub], max_doc_chars=100)
    assert '"""First.\n\n    ' + "x" * 92 + " [… 2908 more characters]" in text
    [line] = [line for line in text.splitlines() if line.startswith("        q: ")]
    assert len(line) == len("        q: ") + 400 and line.endswith("…")


def test_defaults_the_signature_cannot_show_and_keys_in_kwargs_are_in_args():
    schema = obj({"limit": {"type": "number", "default": float("nan")},
                  "content-type": {**STR, "default": "json", "enum": ["json", "xml"]}})
    stub = build_stub("get", "", schema)
    assert stub.signature == "def get(limit: float | None = None, **kwargs: Any) -> Any:"
    assert stub.param_docs == (("limit", "default NaN"), ('"content-type"', 'default "json"'))


def test_non_ascii_parameter_names_are_written_as_a_model_writes_them():
    schema = obj({"météo": STR, "ﬁle": STR, "addr": obj({"rue": STR, "n°": STR})}, ["météo"])
    stub = build_stub("prévision", "", schema)
    # An identifier is a parameter as it is; one that NFKC changes (the parser would turn
    # `ﬁle=` into `file=`) is passed as a key, written as it is, not as `\u` escapes.
    assert stub.signature == ("def pr_vision(météo: str, addr: PrVisionAddr | None = None, "
                              "**kwargs: Any) -> Any:")
    assert [(p.name, p.keyword_only) for p in stub.params] == [
        ("météo", False), ("ﬁle", True), ("addr", False)]
    assert stub.extra_note == ('Keys that are not Python names go in **kwargs, as in '
                               'pr_vision(..., **{"ﬁle": ...}): "ﬁle": str.')
    assert stub.typed_dicts == ('PrVisionAddr = TypedDict("PrVisionAddr", '
                                '{"rue": NotRequired[str], "n°": NotRequired[str]})')
    assert "\\u" not in describe_tools([stub])
    ns: dict[str, Any] = {}
    exec(compile(stubs_module([stub]), "tools_stubs.py", "exec"), ns)
    assert list(ns["pr_vision"].__annotations__)[:2] == ["météo", "addr"]


@pytest.mark.slow
@pytest.mark.mcp
async def test_the_git_servers_description_says_what_each_parameter_accepts(git_repo):
    async with await McpServer.connect(git_server(git_repo)) as server:
        text = CodeMode(Session(tools=server.definitions)).description()
    branch = text[text.index("def git_branch("):]
    branch = branch[: branch.index('"""\n', branch.index('"""') + 3)]
    assert ("        branch_type: Whether to list local branches ('local'), remote branches "
            "('remote') or all branches('all').\n") in branch
    assert "        contains: The commit sha that branch should contain." in branch
    log = text[text.index("def git_log("):]
    assert "        start_timestamp: Start timestamp for filtering commits. Accepts: ISO" in log

