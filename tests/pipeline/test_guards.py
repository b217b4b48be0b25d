"""Monotonic guards (docs/pipeline-spec.md §3)."""

from codemode.pipeline import Allow, Deny, Session

from conftest import Published, error_text, inp, make_tool


async def test_guard_order_is_global_first_then_the_scope_chain_and_first_reason_wins():
    session = Session(tools=[make_tool()])
    session.add_agent("parent")
    session.add_agent("child", parent="parent")
    order = []

    def guard(label, reason=None):
        def check(execution):
            order.append(label)
            return reason

        return check

    session.guard(guard("child"), agent="child")
    session.guard(guard("parent"), agent="parent")
    session.guard(guard("global-1"))
    session.guard(guard("other"), agent="other")
    session.guard(guard("global-2"))
    result = await session.execute(inp(agent="child"))
    assert result.is_error is False
    assert order == ["global-1", "global-2", "parent", "child"]

    order.clear()
    session.guard(guard("parent-denies", "parent says no"), agent="parent")
    result = await session.execute(inp(agent="child"))
    assert result.content == error_text("parent says no")
    assert order == ["global-1", "global-2", "parent", "parent-denies"]


async def test_guards_are_not_consulted_after_a_pre_execute_deny():
    session = Session(tools=[make_tool()])
    consulted = []
    session.guard(lambda e: consulted.append(1))
    session.on("tools/pre-execute", lambda e, n: Deny("listener deny"))
    result = await session.execute(inp())
    assert result.error.message == "listener deny" and consulted == []


async def test_no_listener_can_revive_a_call_a_guard_denies():
    session = Session(tools=[make_tool()])
    session.guard(lambda e: "guarded")
    session.on("tools/pre-execute", lambda e, n: Allow())
    result = await session.execute(inp())
    assert result.error.message == "guarded" and result.denied


async def test_a_guard_denial_still_runs_post_execute_and_the_finalizer():
    finalized = []
    session = Session(tools=[make_tool(finalize_content=lambda e, r: finalized.append(r.is_error))])
    session.guard(lambda e: "no")
    seen = []
    session.on("tools/post-execute", lambda e, r, n: seen.append(r.error.message) or n())
    await session.execute(inp())
    assert seen == ["no"] and finalized == [True]


async def test_a_raising_guard_skips_post_execute():
    session = Session(tools=[make_tool()])
    published = Published(session)
    seen = []
    session.on("tools/post-execute", lambda e, r, n: seen.append(r) or n())

    def guard(execution):
        raise RuntimeError("guard crashed")

    session.guard(guard)
    result = await session.execute(inp())
    assert result.content == error_text("guard crashed")
    assert seen == [] and published.results == [result]


async def test_a_guard_sees_the_frozen_execution_and_can_tell_nested_calls():
    session = Session(tools=[make_tool()])
    seen = []
    session.guard(lambda e: seen.append((e.name, e.call_id, dict(e.arguments), e.parent)) or None)
    await session.execute(inp(arguments={"a": 1}, parent="TOKEN"))
    assert seen == [("echo", "c1", {"a": 1}, "TOKEN")]


async def test_guard_registration_does_not_fire_tools_changed_and_is_disposable():
    session = Session(tools=[make_tool()])
    changed = []
    session.on("tools/changed", lambda s: changed.append(1))
    dispose = session.guard(lambda e: "no")
    assert (await session.execute(inp())).is_error
    dispose()
    assert (await session.execute(inp())).is_error is False
    assert changed == []
