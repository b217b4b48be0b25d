"""What the model reads of each tool: the docstring whole, an `Args:` line per parameter with
what its schema says it accepts, each shape once, names as a model writes them."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from codemode import CodeMode, McpServer, Session
from codemode._run.description import describe_tools, stubs_module
from codemode._run.stubs import build_stub, build_stubs
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



# --------------------------------------------------------------------------- shapes once


def _api_tools() -> list[tuple[str, str, dict[str, Any], dict[str, Any] | None]]:
    """150 tools of a REST API as servers generated from one describe them: five verbs on
    30 resources, every output schema inline (no `$defs`), so the same user, label and
    timestamps come back under a different path in each."""
    user = obj({"login": STR, "id": {"type": "integer"}, "url": STR,
                "site_admin": {"type": "boolean"}}, ["login", "id"])
    label = obj({"name": STR, "color": STR, "description": {"type": ["string", "null"]}},
                ["name"])
    page = obj({"cursor": STR, "size": {"type": "integer", "minimum": 1, "maximum": 100}})

    def resource(i: int) -> dict[str, Any]:
        return obj({"id": {"type": "integer"}, "title": STR, "state": {"enum": ["open", "closed"]},
                    "user": user, "assignees": {"type": "array", "items": user},
                    "labels": {"type": "array", "items": label},
                    f"field_{i}": STR, "created_at": {**STR, "format": "date-time"}},
                   ["id", "title", "user"])

    tools = []
    for i in range(30):
        res, one = resource(i), f"thing{i}"
        by_id = obj({"owner": STR, "id": {"type": "integer"}}, ["owner", "id"])
        tools += [
            (f"list_{one}s", f"List {one}s.", obj({"owner": STR, "page": page}, ["owner"]),
             obj({"items": {"type": "array", "items": res}, "total": {"type": "integer"}},
                 ["items"])),
            (f"get_{one}", f"Get a {one}.", by_id, res),
            (f"create_{one}", f"Create a {one}.",
             obj({"owner": STR, "title": STR, "labels": {"type": "array", "items": label}},
                 ["owner", "title"]), res),
            (f"update_{one}", f"Update a {one}.",
             obj({"owner": STR, "id": {"type": "integer"}, "title": STR, "assignee": user},
                 ["owner", "id"]), res),
            (f"delete_{one}", f"Delete a {one}.", by_id,
             obj({"deleted": {"type": "boolean"}, "by": user}, ["deleted"])),
        ]
    return tools


def _class_fields(text: str) -> list[str]:
    """The field lines of every `class X(TypedDict):` in `text`, one string per class."""
    blocks = text.split("class ")[1:]
    return ["\n".join(line for line in b.splitlines()[1:] if line.startswith("    "))
            for b in blocks if "(TypedDict):" in b.splitlines()[0]]


def test_identical_shapes_are_printed_once_under_one_name():
    tools = _api_tools()
    stubs = build_stubs(tools)
    text = describe_tools(stubs)
    fields = _class_fields(text)
    assert len(fields) == len(set(fields))          # no two classes with the same fields
    # The user, the label and the 30 resources (they differ by one field), the page, the
    # list and the delete results: each one class, whatever tool and path it came from.
    assert len(fields) == 1 + 1 + 30 + 1 + 30 + 1
    user = ("    login: str\n    id: int\n    url: NotRequired[str]\n"
            "    site_admin: NotRequired[bool]")
    [user_class] = [b.split("(", 1)[0] for b in text.split("class ")[1:]
                    if b.split(":\n", 1)[1].startswith(user)]
    assert text.count(f"assignee: {user_class} | None = None") == 30   # every update_thing
    assert text.count(f"by: NotRequired[{user_class}]") == 1            # one delete result
    # The same tools in another order name the same classes.
    assert describe_tools(build_stubs(list(reversed(tools)))) == text
    ns: dict[str, Any] = {}
    exec(compile(stubs_module(stubs), "tools_stubs.py", "exec"), ns)
    assert len(text) < 60_000
