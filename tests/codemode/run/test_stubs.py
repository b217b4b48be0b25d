"""Stubs from JSON Schemas: exact signatures, compilable modules, mypy, real MCP servers."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

import msgspec
import pytest

from codemode._run.description import MAX_DOC_CHARS, describe_tools, stubs_module
from codemode._run.stubs import (
    NO_DEFAULT,
    ParamSpec,
    ToolStub,
    aliases_for,
    build_stub,
    build_stubs,
)


def obj(properties: dict[str, Any], required: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), **extra}


STR: dict[str, Any] = {"type": "string"}
INT: dict[str, Any] = {"type": "integer"}

WEATHER = obj(
    {
        "city": {**STR, "description": "City name, e.g. 'Paris'."},
        "units": {"type": "string", "enum": ["c", "f"], "default": "c"},
        "days": {**INT, "default": 3},
    },
    ["city"],
)
WEATHER_OUT = obj({"temp": {"type": "number"}, "summary": STR}, ["temp"])


# --------------------------------------------------------------------------- aliases


def test_aliases_make_identifiers():
    names = ["get-time", "git.status", "class", "2fa", "météo", "list", "tools", "search", "Any",
             "_private", "__x__", "-"]
    assert aliases_for(names) == {
        "get-time": "get_time",
        "git.status": "git_status",
        "class": "class_",  # keyword
        "2fa": "tool_2fa",  # leading digit
        "_private": "private",  # never a leading "_": the restricted tier refuses it
        "__x__": "x__",
        "-": "tool",
        "météo": "m_t_o",  # non-ASCII
        "list": "list_",  # would shadow the builtin in the program
        "tools": "tools_",  # the guest's tools namespace
        "search": "search",  # already an identifier
        "Any": "Any_",  # imported by the stubs module
    }


def test_alias_collisions_are_resolved_in_sorted_order_whatever_the_input_order():
    names = ["get_time", "get-time", "get.time", "get time", "x_2", "x-"]
    expected = {
        "get_time": "get_time",  # a valid identifier keeps its name
        "get time": "get_time_2",  # " " < "-" < "." in sorted order
        "get-time": "get_time_3",
        "get.time": "get_time_4",
        "x_2": "x_2",
        "x-": "x_",
    }
    for perm in itertools.permutations(names):
        assert aliases_for(perm) == expected


def test_alias_suffix_skips_names_that_are_taken():
    assert aliases_for(["a-b", "a.b", "a_b_2"]) == {"a_b_2": "a_b_2", "a-b": "a_b", "a.b": "a_b_3"}


# --------------------------------------------------------------------------- signatures


def test_required_first_then_optional_with_defaults_and_literals():
    stub = build_stub("get_weather", "  Current weather.\n\n  Details.  ", WEATHER, WEATHER_OUT)
    assert stub.signature == (
        'def get_weather(city: str, units: Literal["c", "f"] = "c", days: int = 3)'
        " -> GetWeatherResult:"
    )
    assert stub.typed_dicts == (
        "class GetWeatherResult(TypedDict):\n    temp: float\n    summary: NotRequired[str]"
    )
    assert stub.docstring == "Current weather.\n\nDetails."
    assert stub.params == (
        ParamSpec("city", True, NO_DEFAULT, False, "str"),
        ParamSpec("units", False, "c", False, 'Literal["c", "f"]'),
        ParamSpec("days", False, 3, False, "int"),
    )
    assert not stub.accepts_extra  # additionalProperties absent: closed, as a Python signature is
    assert stub.name == "get_weather" and stub.alias == "get_weather"


def test_source_is_typed_dicts_then_documented_function():
    stub = build_stub("get_weather", "Current weather.", WEATHER, WEATHER_OUT)
    assert stub.source() == textwrap.dedent(
        '''\
        class GetWeatherResult(TypedDict):
            temp: float
            summary: NotRequired[str]


        def get_weather(city: str, units: Literal["c", "f"] = "c", days: int = 3) -> GetWeatherResult:
            """Current weather.

            Args:
                city: City name, e.g. 'Paris'.
            """
            ...'''  # noqa: E501  (generated stub text, compared verbatim)
    )


def test_optional_without_default_is_none_and_nullable_types():
    schema = obj(
        {
            "a": {"type": ["string", "null"]},  # required but nullable
            "b": {"anyOf": [STR, {"type": "null"}], "default": None},
            "c": {"oneOf": [INT, STR]},
            "d": STR,  # optional, no default
            "e": {"type": "string", "default": None},  # null default on a non-null type
            "f": {"type": "string", "nullable": True},
        },
        ["a", "c"],
        additionalProperties=False,
    )
    stub = build_stub("t", "", schema)
    assert stub.signature == (
        "def t(a: str | None, c: int | str, b: str | None = None, d: str | None = None,"
        " e: str | None = None, f: str | None = None) -> Any:"
    )
    assert [(p.name, p.required, p.default, p.omit_if_none) for p in stub.params] == [
        ("a", True, NO_DEFAULT, False),
        ("c", True, NO_DEFAULT, False),
        ("b", False, None, False),
        ("d", False, NO_DEFAULT, True),  # None means "not given": the schema forbids null
        ("e", False, None, False),
        ("f", False, NO_DEFAULT, False),
    ]
    assert not stub.accepts_extra


def test_primitives_lists_dicts_and_unknowns():
    schema = obj(
        {
            "s": STR,
            "i": INT,
            "n": {"type": "number"},
            "b": {"type": "boolean"},
            "z": {"type": "null"},
            "ls": {"type": "array", "items": INT},
            "lany": {"type": "array"},
            "nested": {"type": "array", "items": {"type": "array", "items": STR}},
            "d": {"type": "object"},
            "dv": {"type": "object", "additionalProperties": {"type": "number"}},
            "anything": {},
            "weird": {"type": "thing"},
            "multi": {"type": ["integer", "string", "null"]},
        },
        ["s", "i", "n", "b", "z", "ls", "lany", "nested", "d", "dv", "anything", "weird", "multi"],
    )
    assert build_stub("p", "", schema).signature == (
        "def p(s: str, i: int, n: float, b: bool, z: None, ls: list[int], lany: list[Any],"
        " nested: list[list[str]], d: dict[str, Any], dv: dict[str, float], anything: Any,"
        " weird: Any, multi: int | str | None) -> Any:"
    )


def test_enum_and_const_become_literals():
    schema = obj(
        {
            "mode": {"enum": ["a", "b"]},
            "level": {"enum": [1, 2, 3]},
            "flag": {"enum": [True, False]},
            "maybe": {"enum": ["x", None]},
            "fixed": {"const": "v1"},
            "floats": {"type": "number", "enum": [0.5, 1.5]},  # not Literal-able: plain type
            "mixed": {"enum": ["on", 1, True, None]},
        },
        ["mode", "level", "flag", "maybe", "fixed", "floats", "mixed"],
    )
    assert build_stub("e", "", schema).signature == (
        'def e(mode: Literal["a", "b"], level: Literal[1, 2, 3], flag: Literal[True, False],'
        ' maybe: Literal["x"] | None, fixed: Literal["v1"], floats: float,'
        ' mixed: Literal["on", 1, True] | None) -> Any:'
    )


def test_nested_objects_become_typed_dicts_named_from_alias_and_path():
    schema = obj(
        {
            "address": obj(
                {
                    "street": STR,
                    "geo": obj(
                        {"lat": {"type": "number"}, "lon": {"type": "number"}}, ["lat", "lon"]
                    ),
                },
                ["street"],
            ),
            "line_items": {"type": "array", "items": obj({"sku": STR, "qty": INT}, ["sku"])},
        },
        ["address"],
    )
    stub = build_stub("create-order", "", schema)
    assert stub.alias == "create_order"
    assert stub.signature == (
        "def create_order(address: CreateOrderAddress,"
        " line_items: list[CreateOrderLineItemsItem] | None = None) -> Any:"
    )
    assert stub.typed_dicts == textwrap.dedent(
        """\
        class CreateOrderAddressGeo(TypedDict):
            lat: float
            lon: float


        class CreateOrderAddress(TypedDict):
            street: str
            geo: NotRequired[CreateOrderAddressGeo]


        class CreateOrderLineItemsItem(TypedDict):
            sku: str
            qty: NotRequired[int]"""
    )


def test_refs_to_defs_and_definitions_and_recursion():
    schema = obj(
        {
            "root": {"$ref": "#/$defs/TreeNode"},
            "owner": {"$ref": "#/definitions/user-info"},
            "color": {"$ref": "#/$defs/Color"},
            "missing": {"$ref": "#/$defs/Nope"},
            "remote": {"$ref": "https://example.com/schema.json"},
        },
        ["root", "owner", "color", "missing", "remote"],
        **{
            "$defs": {
                "TreeNode": obj(
                    {
                        "value": INT,
                        "children": {"type": "array", "items": {"$ref": "#/$defs/TreeNode"}},
                    },
                    ["value"],
                ),
                "Color": {"enum": ["red", "green"]},
            },
            "definitions": {"user-info": obj({"name": STR}, ["name"])},
        },
    )
    stub = build_stub("tree", "", schema)
    assert stub.signature == (
        'def tree(root: TreeNode, owner: UserInfo, color: Literal["red", "green"],'
        " missing: Any, remote: Any) -> Any:"
    )
    assert stub.typed_dicts == textwrap.dedent(
        """\
        class TreeNode(TypedDict):
            value: int
            children: NotRequired[list["TreeNode"]]


        class UserInfo(TypedDict):
            name: str"""
    )


def test_recursive_ref_to_the_root():
    schema = obj({"name": STR, "parent": {"$ref": "#"}}, ["name"])
    stub = build_stub("node", "", schema)
    assert stub.signature == "def node(name: str, parent: NodeArguments | None = None) -> Any:"
    assert stub.typed_dicts == (
        'class NodeArguments(TypedDict):\n    name: str\n    parent: NotRequired["NodeArguments"]'
    )


def test_output_schema_sets_return_type():
    out = obj(
        {"source": {"$ref": "#/$defs/TimeResult"}, "diff": STR},
        ["source", "diff"],
        **{
            "$defs": {
                "TimeResult": obj(
                    {"timezone": STR, "is_dst": {"type": "boolean"}}, ["timezone", "is_dst"]
                )
            }
        },
    )
    stub = build_stub("convert_time", "", obj({"time": STR}, ["time"]), out)
    assert stub.signature == "def convert_time(time: str) -> ConvertTimeResult:"
    assert stub.typed_dicts == textwrap.dedent(
        """\
        class TimeResult(TypedDict):
            timezone: str
            is_dst: bool


        class ConvertTimeResult(TypedDict):
            source: TimeResult
            diff: str"""
    )
    assert (
        build_stub("f", "", {}, {"type": "array", "items": STR}).signature
        == "def f() -> list[str]:"
    )


def test_parameter_names_that_are_not_identifiers_go_through_kwargs():
    schema = obj(
        {"query": STR, "content-type": STR, "from": INT, "kwargs": {"type": "boolean"}},
        ["query", "content-type"],
        additionalProperties=False,
    )
    stub = build_stub("search", "Search things.", schema)
    assert stub.signature == (
        "def search(query: str, kwargs: bool | None = None, **kwargs_2: Any) -> Any:"
    )
    # Every property is a parameter the guest binds; the ones that are not Python names only
    # by keyword. The root stays closed: a misspelt keyword is Python's TypeError.
    assert [(p.name, p.keyword_only) for p in stub.params] == [
        ("query", False), ("content-type", True), ("from", True), ("kwargs", False)]
    assert not stub.accepts_extra
    assert stub.extra_note == (
        "Keys that are not Python names go in **kwargs_2, as in "
        'search(..., **{"content-type": ...}): "content-type": str (required); "from": int.'
    )


def test_non_ascii_names_are_shown_as_written_not_as_escapes():
    # "température-max" is no Python name, so it goes in **kwargs, written as it is
    schema = obj({"température-max": {"type": "number"},
                  "lieu": obj({"städt": STR}, ["städt"])}, ["température-max"])
    stub = build_stub("météo", "Weather.", schema)
    assert stub.extra_note == (
        "Keys that are not Python names go in **kwargs, as in "
        'm_t_o(..., **{"température-max": ...}): "température-max": float (required).'
    )
    assert "städt: str" in stub.typed_dicts
    assert "\\u" not in stub.source()


def test_keys_that_are_not_identifiers_use_functional_typed_dict():
    schema = obj(
        {"headers": obj({"content-type": STR, "class": INT, "ok": STR}, ["content-type"])},
        ["headers"],
    )
    stub = build_stub("req", "", schema)
    assert stub.signature == "def req(headers: ReqHeaders) -> Any:"
    assert stub.typed_dicts == (
        'ReqHeaders = TypedDict("ReqHeaders", {"content-type": str, "class": NotRequired[int],'
        ' "ok": NotRequired[str]})'
    )


def test_defaults_render_as_python_literals():
    schema = obj(
        {
            "s": {**STR, "default": 'say "hi"\n'},
            "f": {"type": "number", "default": 0.5},
            "b": {"type": "boolean", "default": False},
            "l": {"type": "array", "items": INT, "default": [1, 2]},
            "d": {"type": "object", "default": {"k": None}},
            "u": {**STR, "default": "é"},
        }
    )
    assert build_stub("defaults", "", schema).signature == (
        'def defaults(s: str = "say \\"hi\\"\\n", f: float = 0.5, b: bool = False,'
        ' l: list[int] = [1, 2], d: dict[str, Any] = {"k": None}, u: str = "é") -> Any:'
    )


def test_root_without_properties_and_root_ref():
    assert build_stub("ping", "", {"type": "object"}).signature == "def ping() -> Any:"
    assert build_stub("ping", "", {}).params == ()
    closed = build_stub("ping", "", {"type": "object", "additionalProperties": False})
    assert not closed.accepts_extra
    via_ref = {"$ref": "#/$defs/Args", "$defs": {"Args": obj({"x": INT}, ["x"])}}
    assert build_stub("r", "", via_ref).signature == "def r(x: int) -> Any:"


def test_explicit_alias_is_checked():
    assert build_stub("git.status", "", {}, alias="status").signature == "def status() -> Any:"
    with pytest.raises(ValueError, match="alias must be"):
        build_stub("x", "", {}, alias="class")


# --------------------------------------------------------------------------- several tools


SHARED = {"Address": obj({"city": STR}, ["city"])}
OTHER = {"Address": obj({"street": STR}, ["street"])}
TOOLS: list[tuple[str, str, dict[str, Any], dict[str, Any] | None]] = [
    (
        "ship.to",
        "Ship.",
        obj({"to": {"$ref": "#/$defs/Address"}}, ["to"], **{"$defs": SHARED}),
        None,
    ),
    (
        "bill-to",
        "Bill.",
        obj({"to": {"$ref": "#/$defs/Address"}}, ["to"], **{"$defs": SHARED}),
        None,
    ),
    ("visit", "Visit.", obj({"at": {"$ref": "#/$defs/Address"}}, ["at"], **{"$defs": OTHER}), None),
    ("get_weather", "Current weather.", WEATHER, WEATHER_OUT),
    ("Address", "A tool whose name looks like a class.", {}, None),
]


def test_build_stubs_shares_identical_defs_and_renames_different_ones():
    stubs = {s.name: s for s in build_stubs(TOOLS)}
    assert [s.alias for s in build_stubs(TOOLS)] == [
        "ship_to",
        "bill_to",
        "visit",
        "get_weather",
        "Address",
    ]
    # "Address" is a tool alias, so the classes take Address_2 (shared) and Address_3
    assert stubs["bill-to"].signature == "def bill_to(to: Address_2) -> Any:"
    assert stubs["ship.to"].signature == "def ship_to(to: Address_2) -> Any:"
    assert stubs["visit"].signature == "def visit(at: Address_3) -> Any:"
    assert stubs["visit"].typed_dicts == "class Address_3(TypedDict):\n    street: str"


def test_renaming_a_class_renames_the_classes_that_refer_to_it():
    def tool(name: str, inner: dict[str, Any]) -> Any:
        defs = {"Outer": obj({"inner": {"$ref": "#/$defs/Inner"}}, ["inner"]), "Inner": inner}
        return (name, "", obj({"o": {"$ref": "#/$defs/Outer"}}, ["o"], **{"$defs": defs}), None)

    a, b = build_stubs([tool("a", obj({"x": INT}, ["x"])), tool("b", obj({"y": INT}, ["y"]))])
    assert a.signature == "def a(o: Outer) -> Any:"
    assert b.signature == "def b(o: Outer_2) -> Any:"
    assert b.typed_dicts == (
        "class Inner_2(TypedDict):\n    y: int\n\n\nclass Outer_2(TypedDict):\n    inner: Inner_2"
    )


def test_build_stubs_does_not_depend_on_input_order():
    reference = {s.name: s for s in build_stubs(TOOLS)}
    for perm in itertools.permutations(TOOLS):
        assert {s.name: s for s in build_stubs(perm)} == reference


def test_build_stubs_rejects_duplicate_names():
    with pytest.raises(ValueError, match=r"duplicate tool names: \['a'\]"):
        build_stubs([("a", "", {}, None), ("a", "", {}, None)])


def test_stubs_module_prints_each_class_once_and_compiles():
    stubs = build_stubs(TOOLS)
    text = stubs_module(stubs)
    assert text.count("class Address_2(TypedDict):") == 1
    assert text.startswith('# mypy: disable-error-code="empty-body, assignment"\n')
    assert "from __future__ import annotations\n" in text
    ns: dict[str, Any] = {}
    exec(compile(text, "tools_stubs.py", "exec"), ns)
    assert {s.alias for s in stubs} <= ns.keys()
    assert ns["get_weather"].__doc__.startswith("Current weather.")
    assert ns["Address_3"].__required_keys__ == frozenset({"street"})


def test_stubs_module_rejects_stubs_built_apart_with_clashing_classes():
    a = build_stub(
        "a",
        "",
        obj(
            {"x": {"$ref": "#/$defs/P"}}, ["x"], **{"$defs": SHARED | {"P": obj({"a": INT}, ["a"])}}
        ),
    )
    b = build_stub(
        "b",
        "",
        obj({"x": {"$ref": "#/$defs/P"}}, ["x"], **{"$defs": {"P": obj({"b": INT}, ["b"])}}),
    )
    with pytest.raises(ValueError, match="class 'P' is defined differently"):
        stubs_module([a, b])
    with pytest.raises(ValueError, match=r"stubs share aliases: \['a'\]"):
        stubs_module([a, a])


FEATURE_SCHEMAS = {
    "weather": (WEATHER, WEATHER_OUT),
    "nested": (
        obj({"a": obj({"b": obj({"c": {"type": "array", "items": obj({"d": STR})}})})}),
        None,
    ),
    "recursive": (
        obj({"n": {"$ref": "#/$defs/N"}}, **{"$defs": {"N": obj({"next": {"$ref": "#/$defs/N"}})}}),
        None,
    ),
    "mutual": (
        obj(
            {"a": {"$ref": "#/$defs/A"}},
            **{
                "$defs": {
                    "A": obj({"b": {"$ref": "#/$defs/B"}}),
                    "B": obj({"a": {"$ref": "#/$defs/A"}}),
                }
            },
        ),
        None,
    ),
    "functional": (
        obj(
            {"h": obj({"x-y": {"$ref": "#/$defs/H"}, "__p": STR})},
            **{"$defs": {"H": obj({"from": STR})}},
        ),
        None,
    ),
    "root-ref": (obj({"p": {"$ref": "#"}}), obj({"self": {"$ref": "#"}})),
    "hidden": (obj({"content-type": STR, "import": STR}, ["import"]), None),
    "empty": ({}, None),
}


@pytest.mark.parametrize("key", sorted(FEATURE_SCHEMAS))
def test_every_stub_compiles_alone_and_in_a_module(key):
    parameters, output = FEATURE_SCHEMAS[key]
    stub = build_stub(
        key, 'Doc with """quotes""", a \\ backslash and \x00 ending in "', parameters, output
    )
    compile(stub.source(), "stub.py", "exec")
    ns: dict[str, Any] = {}
    exec(compile(stubs_module([stub]), "tools_stubs.py", "exec"), ns)
    assert ns[stub.alias].__doc__.startswith(
        'Doc with """quotes""", a \\ backslash and \x00 ending in "'
    )
    assert ns[stub.alias].__name__ == stub.alias


# --------------------------------------------------------------------------- description


def test_describe_tools_is_compact_sorted_and_cut():
    stubs = build_stubs(
        [
            (
                "zeta",
                "Last tool.",
                obj(
                    {"a": {"$ref": "#/$defs/Pt"}},
                    ["a"],
                    **{"$defs": {"Pt": obj({"x": INT}, ["x"])}},
                ),
                None,
            ),
            (
                "alpha",
                "First paragraph is long enough to be cut.\n\nSecond paragraph.",
                obj(
                    {"p": {"$ref": "#/$defs/Pt"}},
                    ["p"],
                    **{"$defs": {"Pt": obj({"x": INT}, ["x"])}},
                ),
                None,
            ),
            ("mid", "", {}, None),
            ("odd", "Odd keys.", obj({"from": STR}, ["from"]), None),
        ]
    )
    assert describe_tools(stubs, max_doc_chars=20) == textwrap.dedent(
        '''\
        class Pt(TypedDict):
            x: int

        def alpha(p: Pt) -> Any:
            """First paragraph is l [… 40 more characters]"""

        def mid() -> Any: ...

        def odd(**kwargs: Any) -> Any:
            """Odd keys.

            Keys that are not Python names go in **kwargs, as in odd(..., **{"from": ...}): "from": str (required).
            """

        def zeta(a: Pt) -> Any:
            """Last tool."""
        '''  # noqa: E501  (generated stub text, compared verbatim)
    )


def test_describe_tools_stays_small_for_many_tools():
    shared = {"$defs": {"Page": obj({"cursor": STR, "size": INT}, ["size"])}}
    tools = [
        (
            f"tool-{i}",
            f"Does thing {i}. " * 200,
            obj({"q": STR, "page": {"$ref": "#/$defs/Page"}}, ["q"], **shared),
            None,
        )
        for i in range(100)
    ]
    text = describe_tools(build_stubs(tools))
    assert text.count("class Page(TypedDict):") == 1
    assert text.count("def tool_") == 100
    assert text.count("more characters]") == 100  # each description cut, and marked
    assert len(text) < 100 * (MAX_DOC_CHARS + 120)


# --------------------------------------------------------------------------- mypy


@pytest.mark.slow
def test_mypy_checks_programs_against_the_stubs(tmp_path):
    mypy_api = pytest.importorskip("mypy.api")
    tools = [
        ("get_weather", "Current weather.", WEATHER, WEATHER_OUT),
        *[t for t in TOOLS if t[0] != "get_weather"],
        *[(k, "", *FEATURE_SCHEMAS[k]) for k in sorted(FEATURE_SCHEMAS) if k != "weather"],
    ]
    (tmp_path / "tools_stubs.py").write_text(stubs_module(build_stubs(tools)))
    good = textwrap.dedent(
        """\
        from tools_stubs import get_weather, ship_to, hidden

        report = get_weather("Paris", units="f", days=2)
        temp: float = report["temp"]
        ship_to({"city": "Lyon"})
        hidden(**{"import": "x"})
        """
    )
    bad = textwrap.dedent(
        """\
        from tools_stubs import get_weather

        get_weather("Paris")
        get_weather(42)
        get_weather("Paris", units="k")
        get_weather("Paris").get("temp").upper()
        """
    )
    (tmp_path / "good.py").write_text(good)
    (tmp_path / "bad.py").write_text(bad)
    common = [
        "--strict",
        "--no-incremental",
        "--cache-dir",
        str(tmp_path / ".cache"),
        "--show-error-codes",
    ]

    out, err, status = mypy_api.run(
        [*common, str(tmp_path / "good.py"), str(tmp_path / "tools_stubs.py")]
    )
    assert status == 0, out + err

    out, err, status = mypy_api.run([*common, str(tmp_path / "bad.py")])
    assert status == 1
    lines = sorted(
        {int(line.split(":")[1]) for line in out.splitlines() if line.startswith(str(tmp_path))}
    )
    assert lines == [4, 5, 6], out
    assert '"get_weather" has incompatible type "int"; expected "str"' in out
    assert "has incompatible type \"Literal['k']\"" in out


# --------------------------------------------------------------------------- real MCP servers


async def _list_tools(
    args: list[str],
) -> list[tuple[str, str, dict[str, Any], dict[str, Any] | None]]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=args)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
    result = []
    for tool in listed.tools:
        data = tool.model_dump(mode="json", by_alias=True)  # camelCase keys on every SDK version
        result.append(
            (
                data["name"],
                data.get("description") or "",
                data["inputSchema"],
                data.get("outputSchema"),
            )
        )
    return result


def _check_compiles(stubs: list[ToolStub]) -> dict[str, Any]:
    for stub in stubs:
        compile(stub.source(), f"{stub.alias}.py", "exec")
    ns: dict[str, Any] = {}
    exec(compile(stubs_module(stubs), "tools_stubs.py", "exec"), ns)
    assert describe_tools(stubs)
    return ns


@pytest.mark.mcp
async def test_time_server_tools():
    pytest.importorskip("mcp_server_time")
    stubs = {s.name: s for s in build_stubs(await _list_tools(["-m", "mcp_server_time"]))}
    assert {"get_current_time", "convert_time"} <= stubs.keys()
    current = stubs["get_current_time"]
    assert current.alias == "get_current_time"
    assert current.params == (ParamSpec("timezone", True, NO_DEFAULT, False, "str"),)
    assert current.signature.startswith("def get_current_time(timezone: str) -> ")
    convert = stubs["convert_time"]
    assert convert.signature.startswith(
        "def convert_time(source_timezone: str, time: str, target_timezone: str) -> "
    )
    ns = _check_compiles(list(stubs.values()))
    assert callable(ns["get_current_time"]) and callable(ns["convert_time"])
    if convert.classes:  # servers with output schemas: the shared $defs class is typed
        assert "TimeResult" in dict(convert.classes)


@pytest.mark.slow
@pytest.mark.mcp
async def test_git_server_tools(tmp_path):
    pytest.importorskip("mcp_server_git")
    repo = tmp_path / "repo"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    subprocess.run(
        [*git, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "init"], check=True
    )
    tools = await _list_tools(["-m", "mcp_server_git", "--repository", str(repo)])
    stubs = {s.name: s for s in build_stubs(tools)}
    assert {"git_status", "git_log", "git_add"} <= stubs.keys()
    assert all(s.alias == s.name for s in stubs.values())  # already identifiers: kept
    assert stubs["git_status"].signature == "def git_status(repo_path: str) -> Any:"
    assert stubs["git_add"].signature.startswith("def git_add(repo_path: str, files: list[str]")
    log = {p.name: p for p in stubs["git_log"].params}
    assert log["repo_path"].required and not log["max_count"].required
    assert log["max_count"].default == 10
    assert "max_count: int = 10" in stubs["git_log"].signature
    ns = _check_compiles(list(stubs.values()))
    assert callable(ns["git_status"])


def test_param_spec_encodes_without_absent_default():
    assert msgspec.json.decode(msgspec.json.encode(ParamSpec("x", True))) == {
        "name": "x",
        "required": True,
        "omit_if_none": False,
        "annotation": "Any",
        "keyword_only": False,
    }
