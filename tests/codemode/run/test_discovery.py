"""`search_tools` and `describe` inside programs (docs/codemode.md "Finding tools from a
program"): on both tiers, over exactly the run's exposed tools, counted in the run's value,
answered without the pipeline, and the tools they find called like any other."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pytest

from codemode import CodeMode, Policy, Session, events, tool
from codemode._run.description import describe_tools
from codemode.pipeline import Ask, open_log
from codemode.pipeline.log import check
from codemode.sandbox import RestrictedSandbox, WasmSandbox


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def send_invoice(customer_id: str, amount_cents: int) -> str:
    """Send an invoice to a customer by email.

    The amount is charged on the customer's card at the end of the month."""
    return f"sent {amount_cents} to {customer_id}"


@tool
def list_customers(region: str = "eu") -> list[str]:
    """List the customers of a region."""
    return ["ada", "grace"]


@tool
def secret_rotate_keys(vault: str) -> str:
    """Rotate every key of the vault."""
    return "rotated"


@tool
def describe(thing: str) -> str:
    """A tool that happens to be called like the discovery function."""
    return f"a {thing}"


TOOLS = [add, send_invoice, list_customers, secret_rotate_keys, describe]
EXPOSED = ["add", "send_invoice", "list_customers", "describe"]


@pytest.fixture(params=["wasm", "restricted"])
def sandbox(request: pytest.FixtureRequest) -> Any:
    return WasmSandbox() if request.param == "wasm" else RestrictedSandbox()


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "session.jsonl"


async def run(session: Session, program: str) -> Any:
    result = await session.call("run_code", {"code": textwrap.dedent(program)})
    assert not result.is_error, result.content
    return result.value


async def test_search_ranks_the_run_tools_by_name_summary_and_parameters(
        sandbox: Any, log: Path) -> None:
    session = Session(tools=TOOLS, log=log)
    CodeMode(session, sandbox=sandbox, expose=EXPOSED)
    value = await run(session, """\
        by_summary = search_tools("email invoice")
        by_parameter = search_tools("customer id")
        capped = search_tools("a", limit=1)
        nothing = search_tools("zebra")
        [by_summary, [h["name"] for h in by_parameter], len(capped), nothing]
        """)
    await session.aclose()
    by_summary, by_parameter, capped, nothing = value["result"]
    assert by_summary[0] == {
        "name": "send_invoice", "tool": "send_invoice",
        "summary": "Send an invoice to a customer by email.",
        "signature": "def send_invoice(customer_id: str, amount_cents: int) -> str:"}
    assert by_parameter[0] == "send_invoice"       # `customer_id` is one of its parameters
    assert "list_customers" in by_parameter
    assert capped <= 1 and nothing == []
    assert value["subcalls"]["discovery"] == {"search_tools": 4}
    assert value["subcalls"]["total"] == 0        # no tool ran


async def test_describe_is_the_full_listing_of_that_tool(sandbox: Any, log: Path) -> None:
    session = Session(tools=TOOLS, log=log)
    mode = CodeMode(session, sandbox=sandbox, expose=EXPOSED)
    value = await run(session, """\
        [describe("send_invoice"), describe("send_invoice") == describe(name="send_invoice")]
        """)
    await session.aclose()
    text, same = value["result"]
    assert same
    assert text == ('def send_invoice(customer_id: str, amount_cents: int) -> str:\n'
                    '    """Send an invoice to a customer by email.\n\n'
                    "    The amount is charged on the customer's card at the end of the month.\n"
                    '    """\n')
    assert text.strip() in describe_tools(mode.stubs())


async def test_a_tool_named_like_a_discovery_function_keeps_both(sandbox: Any,
                                                                 log: Path) -> None:
    session = Session(tools=TOOLS, log=log)
    mode = CodeMode(session, sandbox=sandbox, expose=EXPOSED)
    assert "def describe_(thing: str) -> str:" in mode.description()
    value = await run(session, """\
        [describe_("cat"), call_tool("describe", thing="dog"), describe("describe")[:30]]
        """)
    await session.aclose()
    assert value["result"] == ["a cat", "a dog", "def describe_(thing: str) -> s"]


async def test_a_hidden_tool_is_never_found_described_or_suggested(sandbox: Any,
                                                                   log: Path) -> None:
    session = Session(tools=TOOLS, log=log)
    CodeMode(session, sandbox=sandbox, expose=EXPOSED)
    value = await run(session, """\
        found = search_tools("secret rotate keys vault")
        errors = []
        for name in ["secret_rotate_keys", "secret_rotate_key", "secret_rotate"]:
            try:
                describe(name)
            except ToolNotFound as exc:
                errors.append(exc.message)
        [[h["name"] for h in found], errors]
        """)
    await session.aclose()
    found, errors = value["result"]
    assert "secret_rotate_keys" not in found
    assert len(errors) == 3
    assert all("did you mean 'secret_rotate_keys'" not in e for e in errors)
    assert "no tool named 'secret_rotate_key' in this run" in errors[1]


async def test_a_tool_found_by_discovery_is_called_through_the_pipeline(
        sandbox: Any, log: Path) -> None:
    session = Session(tools=TOOLS, log=log)
    Policy.from_data({"expose": EXPOSED, "rules": [
        {"tool": "send_invoice", "action": "deny", "reason": "no invoices today"}]}).apply(
        session, sandbox=sandbox)
    value = await run(session, """\
        [hit] = search_tools("customers region", limit=1)
        shown = describe(hit["name"])
        customers = call_tool(hit["tool"])
        try:
            send_invoice(customer_id=customers[0], amount_cents=100)
        except ToolDenied as exc:
            denied = exc.message
        [hit["name"], "def list_customers(" in shown, customers, denied]
        """)
    await session.aclose()
    assert value["result"] == ["list_customers", True, ["ada", "grace"], "no invoices today"]
    assert value["subcalls"]["by_tool"] == {"list_customers": 1, "send_invoice": 1}
    assert value["subcalls"]["denied"] == 1
    logged = list(Session(log=log).log.read())
    called = [e.name for e in logged if isinstance(e, events.CodeDispatch)]
    assert called == ["list_customers", "send_invoice"]     # discovery is not a tool call
    assert check(logged) == []


async def test_discovery_in_async_code_and_wrong_calls(sandbox: Any, log: Path) -> None:
    session = Session(tools=TOOLS, log=log)
    # wrong calls on purpose: the run's own INVALID_ARGS, not the type check's refusal
    CodeMode(session, sandbox=sandbox, expose=EXPOSED, type_check="off")
    value = await run(session, """\
        import asyncio
        async def main():
            hits, text = await asyncio.gather(search_tools("add"), describe("add"))
            return [hits[0]["name"], text.splitlines()[0]]
        errors = []
        for call in (lambda: search_tools(), lambda: search_tools(5),
                     lambda: search_tools("a", limit=0), lambda: describe("add", "x"),
                     lambda: search_tools("x" * 2000)):
            try:
                call()
            except ToolArgumentError as exc:
                errors.append(exc.code)
        [asyncio.run(main()), errors]
        """)
    await session.aclose()
    assert value["result"] == [["add", "def add(a: int, b: int) -> int:"],
                               ["INVALID_ARGS"] * 5]


async def test_a_resumed_run_replays_its_discovery_calls(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    session = Session(tools=TOOLS, log=log)

    async def ask_for_invoices(execution: Any, next: Any) -> Any:
        if execution.name == "send_invoice":
            return Ask("invoices need a person")
        return await next()

    session.on("tools/pre-execute", ask_for_invoices)
    CodeMode(session, expose=EXPOSED, resumable=True)
    program = textwrap.dedent("""\
        [hit] = search_tools("invoice", limit=1)
        sent = call_tool(hit["tool"], customer_id="ada", amount_cents=5)
        [describe("add").splitlines()[0], sent]
        """)
    pending = await session.call("run_code", {"code": program}, call_id="r")
    assert [a["toolName"] for a in pending.value["approvals"]] == ["send_invoice"]
    done = await session.resume("r", {"r:2": True})
    await session.aclose()
    assert done.value["result"] == ["def add(a: int, b: int) -> int:", "sent 5 to ada"]
    assert done.value["subcalls"]["discovery"] == {"search_tools": 1, "describe": 1}
    assert check(list(Session(log=log).log.read())) == []


def test_the_typed_stubs_of_discovery_match_what_the_guest_binds() -> None:
    import ast

    from codemode._run.discovery import DISCOVERY_SPECS, DISCOVERY_STUBS

    functions = {f.name: f for f in ast.parse(DISCOVERY_STUBS).body
                 if isinstance(f, ast.FunctionDef)}
    for spec in DISCOVERY_SPECS:
        args = functions[spec.alias].args
        defaults = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)
        assert [(a.arg, d is None) for a, d in zip(args.args, defaults, strict=True)] == [
            (p.name, p.required) for p in spec.params]


async def test_each_discovery_call_is_in_the_log_as_a_lookup(log: Path) -> None:
    session = Session(tools=TOOLS, log=log)
    CodeMode(session, expose=EXPOSED)
    value = await run(session, """\
        search_tools("invoice", limit=2)
        describe("add")
        try:
            describe("delete_everything")
        except ToolNotFound:
            pass
        add(a=1, b=2)
        """)
    await session.aclose()
    with open_log(log) as reopened:             # what the file holds, read back
        logged = list(reopened.read())
    lookups = [e for e in logged if isinstance(e, events.CodeLookup)]
    dispatched = [e.name for e in logged if isinstance(e, events.CodeDispatchStart)]
    assert [(e.name, e.arguments, e.is_error, e.code) for e in lookups] == [
        # under their wire names, apart from a tool that is named `describe`
        ("codemode/search_tools", {"query": "invoice", "limit": 2}, False, msgspec.UNSET),
        ("codemode/describe", {"name": "add"}, False, msgspec.UNSET),
        ("codemode/describe", {"name": "delete_everything"}, True, "UNKNOWN_TOOL")]
    run_call = next(e for e in logged if isinstance(e, events.ToolCall))
    assert {e.parent_call_id for e in lookups} == {run_call.call_id}
    assert dispatched == ["add"]                  # no tool ran for a lookup
    assert value["subcalls"]["discovery"] == {"search_tools": 1, "describe": 2}
