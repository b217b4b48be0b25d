"""What an agent loop offers the model once `CodeMode` is on a session (docs/codemode.md
"What the model is offered"): `run_code` alone when nobody chose a mode, the mode chosen
otherwise, and only the exposed tools for direct calls; every adapter offers the same."""

from __future__ import annotations

import pytest

from codemode import CodeMode, Policy, Session, tool
from codemode.adapters.anthropic import tools as anthropic_tools
from codemode.adapters.openai import chat_completion_tools, responses_tools

CODE_MODE_RULE = "Only `run_code` may be called directly"


@tool
def lookup_customer(email: str) -> dict:
    """Find a customer by email."""
    return {"email": email, "plan": "pro"}


@tool
def get_order(order_id: str) -> dict:
    """An order by id."""
    return {"id": order_id}


@tool
def delete_order(order_id: str) -> str:
    """Delete an order."""
    return f"deleted {order_id}"


def offered(session: Session) -> list[str]:
    """What the OpenAI adapter offers, checked against the others: the same names."""
    names = [t["function"]["name"] for t in chat_completion_tools(session)]
    assert [t["name"] for t in responses_tools(session)] == names
    assert [t["name"] for t in anthropic_tools(session)] == names
    return names


async def test_the_readme_example_in_an_agent_loop_offers_run_code_alone():
    session = Session(tools=[lookup_customer])        # as the README: no mode chosen
    mode = CodeMode(session)
    assert offered(session) == ["run_code"]
    assert CODE_MODE_RULE in mode.description()
    direct = await session.call("lookup_customer", {"email": "ada@example.com"})
    assert direct.error.code == "UNKNOWN_TOOL"
    assert direct.error.message.endswith("call `lookup_customer` inside a program")
    result = await session.call("run_code",
                                {"code": 'lookup_customer("ada@example.com")["plan"]'})
    assert result.value["result"] == "pro"


def test_a_policy_applied_to_a_session_puts_it_in_code_mode_too():
    session = Session(tools=[get_order, delete_order])
    mode = Policy.from_data({"expose": ["get_*"]}).apply(session)
    assert offered(session) == ["run_code"]
    listed = chat_completion_tools(session)[0]["function"]["description"]
    assert listed == mode.description() and "def get_order(" in listed
    assert "delete_order" not in listed


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_mode_chosen_before_or_after_code_mode_is_kept(when):
    session = Session(tools=[lookup_customer], mode="both" if when == "before" else None)
    mode = CodeMode(session)
    if when == "after":
        session.set_mode("both")
    assert offered(session) == ["lookup_customer", "run_code"]
    assert CODE_MODE_RULE not in session.resolve("run_code").description
    assert mode.description() == session.resolve("run_code").description


async def test_an_explicit_native_session_offers_its_tools_and_the_host_may_run_code():
    session = Session(tools=[lookup_customer], mode="native")
    CodeMode(session)
    assert offered(session) == ["lookup_customer"]
    direct = await session.call("lookup_customer", {"email": "ada@example.com"})
    assert direct.value == {"email": "ada@example.com", "plan": "pro"}
    ran = await session.call("run_code", {"code": "6 * 7"})
    assert ran.value["result"] == 42


def test_closing_code_mode_gives_the_session_its_default_back():
    session = Session(tools=[get_order, delete_order])
    mode = CodeMode(session, expose=["get_order"])
    assert offered(session) == ["run_code"]
    mode.close()
    assert (session.mode, session.direct_tools) == ("native", None)
    assert offered(session) == ["get_order", "delete_order"]


async def test_a_policys_expose_narrows_a_both_mode_offer_and_its_direct_calls():
    session = Session(tools=[get_order, delete_order], mode="both")
    Policy.from_data({"expose": ["get_*"]}).apply(session)
    assert offered(session) == ["get_order", "run_code"]
    assert (await session.call("get_order", {"order_id": "1"})).value == {"id": "1"}
    hidden = await session.call("delete_order", {"order_id": "1"})
    assert hidden.error.code == "UNKNOWN_TOOL"
    assert hidden.error.message == 'unknown tool "delete_order"; did you mean "get_order"?'


def test_an_explicit_native_session_is_narrowed_to_the_exposed_tools_too():
    session = Session(tools=[get_order, delete_order], mode="native")
    Policy.from_data({"expose": ["get_*"]}).apply(session)
    assert offered(session) == ["get_order"]


async def test_the_pydantic_ai_toolset_describes_code_mode():
    pytest.importorskip("pydantic_ai", reason="pydantic-ai is not installed")
    from codemode.adapters.pydantic_ai import CodeModeToolset

    session = Session(tools=[lookup_customer])
    toolset = CodeModeToolset(session)
    assert session.mode == "code" and offered(session) == ["run_code"]
    assert CODE_MODE_RULE in toolset.code_mode.description(toolset.agent)
