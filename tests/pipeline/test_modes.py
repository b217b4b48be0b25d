"""Presentation modes and the reserved router tool (docs/pipeline-spec.md §11.1, S3)."""

import pytest

from codemode.pipeline import ReservedToolError, Session, Signal

from conftest import Published, error_text, inp, make_tool


def router(name="run_code"):
    async def body(args, ctx):
        return {"ran": args.get("code")}

    return make_tool(name, body)


async def test_under_code_a_direct_call_of_a_visible_tool_is_unknown_tool_before_any_policy():
    finalized = []
    session = Session(
        tools=[make_tool("lookup", finalize_content=lambda e, r: finalized.append(1))], mode="code"
    )
    session.reserve(router())
    policy = []
    session.on("tools/pre-execute", lambda e, n: policy.append(1) or n())
    session.guard(lambda e: policy.append(2))
    published = Published(session)
    result = await session.execute(inp("lookup"))
    message = "only `run_code` is callable directly — call `lookup` inside a program"
    assert result.content == error_text(message)
    assert (result.error.info.name, result.error.code) == ("UnknownToolError", "UNKNOWN_TOOL")
    assert policy == [] and finalized == [] and published.results == [result]


async def test_the_route_hint_uses_the_reserved_tools_actual_name():
    session = Session(tools=[make_tool("lookup")], mode="code", reserved_name="execute_python")
    session.reserve(router("execute_python"))
    result = await session.execute(inp("lookup"))
    assert (
        result.error.message
        == "only `execute_python` is callable directly — call `lookup` inside a program"
    )


async def test_a_pre_aborted_collapsed_call_is_aborted_before_dispatch_and_keeps_its_finalizer():
    finalized = []
    session = Session(
        tools=[make_tool("lookup", finalize_content=lambda e, r: finalized.append(r.error.code))],
        mode="code",
    )
    result = await session.execute(inp("lookup", signal=Signal.aborted_with()))
    assert result.error.code == "ABORTED_BEFORE_DISPATCH" and finalized == [
        "ABORTED_BEFORE_DISPATCH"
    ]


async def test_sub_calls_and_the_reserved_tool_are_exempt_from_the_collapse():
    session = Session(tools=[make_tool("lookup")], mode="code")
    session.reserve(router())
    assert (await session.execute(inp("lookup", {"q": 1}, parent=object()))).value == {"q": 1}
    assert (await session.execute(inp("run_code", {"code": "1"}))).value == {"ran": "1"}


async def test_an_unknown_name_under_code_still_reaches_policy_and_fails_at_dispatch():
    session = Session(mode="code")
    seen = []
    session.on("tools/pre-execute", lambda e, n: seen.append(e.name) or n())
    result = await session.execute(inp("ghost"))
    assert seen == ["ghost"] and result.error.message == 'unknown tool "ghost"'


@pytest.mark.parametrize("mode", ["native", "both"])
async def test_native_and_both_allow_direct_calls(mode):
    session = Session(tools=[make_tool("lookup")], mode=mode)
    session.reserve(router())
    assert (await session.execute(inp("lookup", {"q": 1}))).value == {"q": 1}


def test_model_tools_per_mode():
    session = Session(tools=[make_tool("a"), make_tool("b")])
    session.reserve(router())
    names = lambda: [t["name"] for t in session.model_tools()]  # noqa: E731
    assert names() == ["a", "b"]
    session.set_mode("code")
    assert names() == ["run_code"]
    session.set_mode("both")
    assert names() == ["a", "b", "run_code"]


def test_the_reserved_tool_cannot_be_registered_shadowed_or_listed():
    session = Session(tools=[make_tool("a")])
    with pytest.raises(ReservedToolError):
        session.register(make_tool("run_code"))
    with pytest.raises(ReservedToolError):
        session.register(make_tool("run_code"), agent="sub")
    dispose = session.reserve(router())
    with pytest.raises(ReservedToolError):
        session.reserve(router())
    assert [d.name for d in session.visible_tools()] == ["a"]
    assert session.resolve("run_code").name == "run_code"
    dispose()
    assert session.resolve("run_code") is None


def test_modes_are_selectable_per_agent_inherited_and_disposable():
    session = Session(mode="native")
    session.add_agent("planner")
    session.add_agent("worker", parent="planner")
    dispose = session.set_mode("code", agent="planner")
    assert (session.mode_for(None), session.mode_for("planner"), session.mode_for("worker")) == (
        "native",
        "code",
        "code",
    )
    opt_out = session.set_mode("native", agent="worker")
    assert session.mode_for("worker") == "native"
    opt_out()
    assert session.mode_for("worker") == "code"
    dispose()
    assert session.mode_for("worker") == "native"
    with pytest.raises(ValueError):
        session.set_mode("python")  # type: ignore[arg-type]


def test_agent_scoped_tools_shadow_global_ones_for_that_agent_and_descendants():
    session = Session(tools=[make_tool("search", description="global")])
    session.add_agent("child", parent="root")
    session.register(make_tool("search", description="root's"), agent="root")
    session.register(make_tool("extra"), agent="child")
    assert [d.description for d in session.visible_tools()] == ["global"]
    assert [(d.name, d.description) for d in session.visible_tools("child")] == [
        ("search", "root's"), ("extra", "extra tool")]


def test_tool_set_changes_are_notified():
    session = Session()
    changed = []
    session.on("tools/changed", lambda s: changed.append(len(s.visible_tools())))
    dispose = session.register(make_tool("a"))
    session.set_mode("both")
    dispose()
    assert changed == [1, 1, 0]


# -- a mode nobody chose, and the tools offered for direct calls ---------------------------

def test_a_mode_nobody_chose_follows_the_default_a_component_sets():
    session = Session(tools=[make_tool("a")])
    session.reserve(router())
    assert (session.mode, session.mode_chosen) == ("native", False)
    changed = []
    session.on("tools/changed", lambda s: changed.append(s.mode))
    dispose = session.set_default_mode("code")
    assert (session.mode, session.mode_for("agent"), session.mode_chosen) == ("code", "code", False)
    assert [t["name"] for t in session.model_tools()] == ["run_code"]
    dispose()
    assert session.mode == "native" and changed == ["code", "native"]
    with pytest.raises(ValueError):
        session.set_default_mode("python")  # type: ignore[arg-type]


@pytest.mark.parametrize("chosen", ["native", "both"])
def test_a_chosen_mode_wins_over_the_default_before_and_after(chosen):
    given = Session(tools=[make_tool("a")], mode=chosen)
    given.set_default_mode("code")
    assert (given.mode, given.mode_chosen) == (chosen, True)
    later = Session(tools=[make_tool("a")])
    later.set_default_mode("code")
    undo = later.set_mode(chosen)
    assert (later.mode, later.mode_chosen) == (chosen, True)
    undo()                                      # back to "not chosen": the default again
    assert (later.mode, later.mode_chosen) == ("code", False)


@pytest.mark.parametrize("mode", ["native", "both"])
async def test_direct_tools_narrow_the_offer_and_the_direct_calls(mode):
    session = Session(tools=[make_tool("get_order"), make_tool("delete_order")], mode=mode)
    session.reserve(router())
    seen = []
    session.on("tools/pre-execute", lambda e, n: seen.append(e.name) or n())
    dispose = session.set_direct_tools(["get_order"])
    admits = session.direct_tools
    assert admits is not None and admits("get_order") and not admits("delete_order")
    offered = [t["name"] for t in session.model_tools()]
    assert offered == (["get_order"] if mode == "native" else ["get_order", "run_code"])
    hidden = await session.execute(inp("delete_order"))
    # like a name visible nowhere: policy sees it, then UNKNOWN_TOOL naming no hidden tool
    assert seen == ["delete_order"] and hidden.error.code == "UNKNOWN_TOOL"
    assert hidden.error.message == 'unknown tool "delete_order"; did you mean "get_order"?'
    assert (await session.execute(inp("get_order", {"q": 1}))).value == {"q": 1}
    assert (await session.execute(inp("run_code", {"code": "1"}))).value == {"ran": "1"}
    # a sub-call is not narrowed (its caller passes `reachable`)
    sub = await session.execute(inp("delete_order", {"q": 2}, parent=object()))
    assert sub.value == {"q": 2}
    dispose()
    assert session.direct_tools is None
    assert (await session.execute(inp("delete_order", {"q": 3}))).value == {"q": 3}


async def test_an_unknown_name_suggests_the_closest_names_the_call_could_reach():
    session = Session(tools=[make_tool("get_order"), make_tool("get_orders"),
                             make_tool("send_email")], mode="native")
    result = await session.execute(inp("get_ordr"))
    assert result.error.message == ('unknown tool "get_ordr"; did you mean "get_order" or '
                                    '"get_orders"?')
    far = await session.execute(inp("weather"))
    assert far.error.message == 'unknown tool "weather"'
    # a sub-call limited to `reachable` is told only of those names
    narrowed = await session.execute(inp("get_ordr", parent=object(),
                                         reachable=frozenset({"get_orders", "send_email"})))
    assert narrowed.error.message == 'unknown tool "get_ordr"; did you mean "get_orders"?'


async def test_under_code_an_unknown_direct_name_is_pointed_to_the_reserved_tool():
    session = Session(tools=[make_tool("run_codes")], mode="code")
    session.reserve(router())
    result = await session.execute(inp("run_cod"))
    assert result.error.message == 'unknown tool "run_cod"; did you mean "run_code"?'
