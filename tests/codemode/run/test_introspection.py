"""Inside the program, `help(tool)` and `inspect.signature(tool)` show the tool as its stub
does (signature, types, defaults, docstring with `Args:`), on every tier."""

from __future__ import annotations

import textwrap
from typing import Any, Literal

import pytest

from codemode import CodeMode, Session, ToolDefinition, tool
from codemode.pipeline import thaw
from codemode.sandbox import RestrictedProcessSandbox, RestrictedSandbox, WasmSandbox

TIERS = {"wasm": WasmSandbox, "restricted": RestrictedSandbox,
         "process": RestrictedProcessSandbox}


@tool
def weather(city: str, units: Literal["c", "f"] = "c", days: int = 3) -> dict[str, Any]:
    """Get the weather.

    The forecast covers `days` days."""
    return {"city": city}


async def _noop(args: dict[str, Any], ctx: Any) -> str:
    return "ok"


# A tool from a JSON Schema, as an MCP server describes one: parameter descriptions, a
# pattern, a key that is not a Python name.
BOOK = ToolDefinition(
    name="book", description="Book a room.", execute=_noop,
    parameters={"type": "object", "required": ["room", "start"], "properties": {
        "room": {"type": "string", "description": "Room name."},
        "start": {"type": "string", "pattern": r"^\d{2}:\d{2}$"},
        "seats": {"type": "integer", "minimum": 1, "default": 2},
        "from": {"type": "string"}}})

HELP_WEATHER = '''\
Help on tool weather:

weather(city: str, units: Literal["c", "f"] = 'c', days: int = 3) -> dict[str, Any]
    Get the weather.

    The forecast covers `days` days.
'''

HELP_BOOK = '''\
Help on tool book:

book(room: str, start: str, seats: int = 2, **kwargs: Any) -> Any
    Book a room.

    Keys that are not Python names go in **kwargs, as in book(..., **{"from": ...}): "from": str.

    Args:
        room: Room name.
        start: pattern ^\\d{2}:\\d{2}$
        seats: >= 1
'''


async def _run(tier: str, code: str) -> Any:
    session = Session(tools=[weather, BOOK])
    CodeMode(session, sandbox=TIERS[tier]())
    result = await session.call("run_code", {"code": textwrap.dedent(code)})
    await session.aclose()
    assert not result.is_error, result.text
    return thaw(result.value)


@pytest.mark.slow
@pytest.mark.parametrize("tier", list(TIERS))
async def test_help_and_inspect_signature_show_the_stub(tier):
    value = await _run(tier, """\
        import inspect
        help(weather)
        help(book)
        sig = inspect.signature(weather)
        print(sig)
        [str(sig), str(inspect.signature(book)),
         [[p.name, repr(p.annotation), p.default] for p in sig.parameters.values()
          if p.default is not p.empty]]
        """)
    assert "".join(value["logs"]) == (
        HELP_WEATHER + HELP_BOOK
        + "(city: str, units: Literal[\"c\", \"f\"] = 'c', days: int = 3) -> dict[str, Any]\n")
    assert value["result"] == [
        "(city: str, units: Literal[\"c\", \"f\"] = 'c', days: int = 3) -> dict[str, Any]",
        "(room: str, start: str, seats: int = 2, **kwargs: Any) -> Any",
        [["units", 'Literal["c", "f"]', "c"], ["days", "int", 3]]]


@pytest.mark.slow
@pytest.mark.parametrize("tier", list(TIERS))
async def test_help_lists_the_tools_and_describes_functions(tier):
    value = await _run(tier, """\
        import json
        help()
        help("weather")
        help("nope")
        help(json.dumps)
        """)
    logs = "".join(value["logs"])
    assert logs.startswith(
        "Tools (call help(tool) for one): book, describe, search_tools, weather\n"
        "help(obj) shows the signature and docstring of a function, class or module.\n"
        + HELP_WEATHER + "No tool named 'nope'; tools: book, describe, search_tools, weather\n"
        "Help on function dumps:\n\ndumps(obj, ")


@pytest.mark.slow
@pytest.mark.parametrize("tier", ["restricted", "process"])
async def test_a_signature_on_the_restricted_tier_gives_no_host_object(tier):
    # copy.deepcopy's `_nil=[]` is a list of the host process: the program sees its text.
    value = await _run(tier, """\
        import copy, inspect
        sig = inspect.signature(copy.deepcopy)
        again = type(sig).from_callable(copy.deepcopy)
        nil = sig.parameters["_nil"].default
        [str(sig), type(nil) is list, type(again.parameters["_nil"].default) is list]
        """)
    assert value["result"] == ["(x, memo=None, _nil=[])", False, False]


@pytest.mark.parametrize("tier", ["wasm", "restricted"])
def test_a_tool_spec_without_a_signature_shows_its_parameters(tier):
    from codemode.sandbox import ParamSpec, RunRequest, SubCallReply, ToolSpec

    spec = ToolSpec(name="send-mail", alias="send_mail", doc="Send a mail.", accepts_extra=False,
                    params=(ParamSpec(name="to", required=True), ParamSpec(name="cc"),
                            ParamSpec(name="from", keyword_only=True)))
    code = "import inspect\n[str(inspect.signature(send_mail)), inspect.getdoc(send_mail)]"
    outcome = TIERS[tier]().run(RunRequest(code=code, tools=(spec,)),
                                lambda batch: SubCallReply())
    assert outcome.value == ["(to, cc=None, **kwargs)", "Send a mail."], outcome.error
