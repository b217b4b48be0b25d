"""A dry run (`CodeMode.plan`, docs/codemode.md "Plan before the run"): read-only tools run
governed and labelled; tools with effects do not run, and each call of one is an entry of
the plan with what the policy would do with it; a simulated value is the tool's simulator's,
else built from its output schema, else a marker; a call after a simulated value says so."""

from __future__ import annotations

import asyncio
import textwrap
from typing import Any

import mcp.types
import msgspec
import pytest

from codemode import (
    ApprovalUsed,
    Plan,
    PlanFailed,
    Policy,
    ResumeTampered,
    Session,
    approve_plan,
    run_approved,
    tool,
)
from codemode._mcp.listing import tool_definition
from codemode._run.approval_uses import approval_problems
from codemode._run.plan import SIMULATED, from_schema
from codemode.fixtures.mailbox import mailbox_tools
from codemode.pipeline import events, thaw
from codemode.pipeline.log import MemoryLog

FIVE_MAILS = """\
    for m in list_inbox():
        read_email(id=m["id"])
    for name in ["ann", "bob", "cy", "dee", "eve"]:
        send_email(to=name + "@example.com", subject="hello", body="Hi " + name)
    print("done")
    """

POLICY = {"labels": [{"tool": "read_email", "label": "private"}],
          "rules": [{"tool": "send_*", "action": "ask", "reason": "mail leaves the house"}]}


async def plan_of(program: str, tools: list[Any], policy: dict[str, Any] | None = None
                  ) -> Plan:
    session = Session(tools=tools, log=MemoryLog())
    mode = Policy.from_data(policy if policy is not None else POLICY).apply(session)
    try:
        return await mode.plan(textwrap.dedent(program))
    finally:
        await session.aclose()


@pytest.mark.slow
async def test_a_dry_run_sends_nothing_and_plans_each_send_with_the_policys_decision() -> None:
    outbox: list[dict[str, Any]] = []
    reads: list[str] = []
    tools = mailbox_tools(outbox)

    @tool(read_only=True)
    def count_reads(id: str) -> int:
        """Count a read."""
        reads.append(id)
        return len(reads)

    plan = await plan_of(FIVE_MAILS + "count_reads(id='x')\n", [*tools, count_reads])
    assert outbox == []                                # nothing with effects ran
    assert reads == ["x"]                              # read-only tools ran for real
    assert [e.tool for e in plan.entries] == ["send_email"] * 5
    assert [e.arguments["to"] for e in plan.entries] == [
        f"{n}@example.com" for n in ["ann", "bob", "cy", "dee", "eve"]]
    assert [e.n for e in plan.entries] == [1, 2, 3, 4, 5]
    assert {e.decision for e in plan.entries} == {"ask"}
    assert plan.asked() == plan.entries
    assert plan.entries[0].reason.startswith("mail leaves the house")
    assert plan.entries[0].labels == ["private"]       # the reads were labelled as usual
    assert plan.entries[0].quota == []
    assert plan.entries[0].simulated == "schema"       # send_email -> str: ""
    assert not plan.entries[0].after_simulated and plan.entries[1].after_simulated
    assert not plan.complete
    assert plan.value["logs"] == ["done\n"]


@pytest.mark.slow
@pytest.mark.parametrize("program, complete", [
    # one send whose simulated value ("") decides whether a second one happens
    ('if send_email(to="a@b.c", subject="s", body="b"):\n'
     '    send_email(to="mallory@b.c", subject="s", body="b")\n', False),
    ('send_email(to="a@b.c", subject="s", body="b")\n', False),
    ('print([m["id"] for m in list_inbox()])\n', True),          # only reads: nothing simulated
])
async def test_a_plan_is_complete_only_when_no_simulated_value_reached_the_program(
        program: str, complete: bool) -> None:
    plan = await plan_of(program, mailbox_tools([]))
    assert plan.complete is complete
    assert len(plan.entries) == (0 if complete else 1)


@pytest.mark.slow
async def test_a_denied_call_gives_no_simulated_value_and_keeps_the_plan_complete() -> None:
    policy = {"rules": [{"tool": "send_*", "action": "deny", "reason": "no mail"}]}
    plan = await plan_of('try:\n    send_email(to="a@b.c", subject="s", body="b")\n'
                         'except ToolDenied:\n    pass\n'
                         'try:\n    send_email(to="c@b.c", subject="s", body="b")\n'
                         'except ToolDenied:\n    pass\n', mailbox_tools([]), policy)
    assert [e.decision for e in plan.entries] == ["deny", "deny"]
    assert [e.after_simulated for e in plan.entries] == [False, False]
    assert plan.complete                    # the real run gets the same two refusals


@pytest.mark.slow
async def test_a_tool_that_says_nothing_has_effects_and_its_value_comes_from_its_simulator(
        ) -> None:
    ran: list[str] = []

    @tool
    def archive(id: str) -> dict[str, str]:
        """Archive a message."""
        ran.append(id)
        return {"id": id}

    @tool(simulate=lambda args: {"would_delete": args["id"]})
    def delete(id: str) -> dict[str, str]:
        """Delete a message."""
        ran.append(id)
        return {}

    def opaque(id: str):  # type: ignore[no-untyped-def]
        """No output schema."""
        ran.append(id)

    program = """\
        print(archive(id="m1"), delete(id="m2"), opaque(id="m3"))
        """
    plan = await plan_of(program, [archive, delete, tool(opaque)], {})
    assert ran == []
    assert [(e.tool, e.decision, e.simulated) for e in plan.entries] == [
        ("archive", "allow", "schema"), ("delete", "allow", "simulator"),
        ("opaque", "allow", "marker")]
    assert "{'would_delete': 'm2'}" in "".join(plan.value["logs"])
    assert f"{{'{SIMULATED}': 'opaque'}}" in "".join(plan.value["logs"])


@pytest.mark.slow
async def test_a_denied_entry_is_refused_in_the_dry_run_as_in_the_real_one() -> None:
    outbox: list[dict[str, Any]] = []
    program = """\
        try:
            send_email(to="eve@example.net", subject="x", body="y")
        except ToolDenied as exc:
            print("refused:", exc)
        """
    plan = await plan_of(program, mailbox_tools(outbox), {
        "rules": [{"tool": "send_email", "action": "deny", "reason": "no mail"}]})
    [entry] = plan.entries
    assert (entry.decision, entry.reason) == ("deny", "no mail")
    assert "refused:" in "".join(plan.value["logs"]) and outbox == []


@pytest.mark.slow
async def test_a_failed_dry_run_raises_with_the_entries_it_made() -> None:
    outbox: list[dict[str, Any]] = []
    with pytest.raises(PlanFailed) as caught:
        await plan_of('send_email(to="a@b.c", subject="s", body="b")\n1/0\n',
                      mailbox_tools(outbox))
    assert [e.tool for e in caught.value.plan.entries] == ["send_email"]
    assert outbox == []


def test_read_only_comes_from_the_tool_definition_and_the_mcp_annotation() -> None:
    [listing, reading, sending] = mailbox_tools([])
    assert listing.read_only and reading.read_only and not sending.read_only

    async def call(name: str, args: dict[str, Any], ctx: Any) -> Any:
        return None

    def listed(**annotations: Any) -> Any:
        return mcp.types.Tool(name="t", inputSchema={"type": "object"},
                              annotations=mcp.types.ToolAnnotations(**annotations))

    assert tool_definition(listed(readOnlyHint=True), call)[0].read_only
    assert not tool_definition(listed(destructiveHint=True), call)[0].read_only
    assert not tool_definition(listed(), call)[0].read_only


def test_a_value_from_a_schema_is_the_simplest_it_accepts() -> None:
    schema = {"type": "object", "required": ["id", "tags", "n", "kind"],
              "properties": {"id": {"type": "string"}, "tags": {"type": "array"},
                             "n": {"type": ["integer", "null"]},
                             "kind": {"enum": ["a", "b"]}}}
    assert from_schema(schema) == {"id": "", "tags": [], "n": 0, "kind": "a"}
    with pytest.raises(ValueError):
        from_schema({"$ref": "#/$defs/X"})


@pytest.mark.slow
async def test_the_policy_says_which_tools_only_read_and_wins_over_the_definition() -> None:
    outbox: list[dict[str, Any]] = []
    program = """\
        list_inbox()
        send_email(to="a@b.c", subject="s", body="b")
        """
    plan = await plan_of(program, mailbox_tools(outbox),
                         {"read_only": ["send_*"], "changes": ["list_inbox"]})
    assert [e.tool for e in plan.entries] == ["list_inbox"]
    assert outbox == [{"to": "a@b.c", "subject": "s", "body": "b"}]


async def approved_run(program: str, change: Any = None, deny: dict[int, str] | None = None
                       ) -> tuple[Any, list[dict[str, Any]], Any]:
    """Plan `program`, approve the plan (denying `deny`), then run `program` changed by
    `change` (None: as planned) under the approval: (result, outbox, the log's events)."""
    outbox: list[dict[str, Any]] = []
    log = MemoryLog()
    session = Session(tools=mailbox_tools(outbox), log=log)
    mode = Policy.from_data(POLICY).apply(session)
    try:
        plan = await mode.plan(textwrap.dedent(program))
        approval = approve_plan(mode, plan, deny=deny or {})
        if change is not None:
            approval = change(approval)
        result = await run_approved(mode, approval)
        return result, outbox, log.read()
    finally:
        await session.aclose()


@pytest.mark.slow
async def test_one_approval_sends_five_mails_once_each_without_pausing() -> None:
    result, outbox, log = await approved_run(FIVE_MAILS)
    assert not result.is_error and result.value.get("status") != "pending", result.text
    assert [m["to"] for m in outbox] == [
        f"{n}@example.com" for n in ["ann", "bob", "cy", "dee", "eve"]]
    assert not any(isinstance(e, events.ToolSuspended) for e in log)


@pytest.mark.slow
async def test_a_denied_entry_is_a_binding_rejection_and_the_others_run() -> None:
    program = FIVE_MAILS.replace('send_email(', 'try:\n            send_email(').replace(
        'body="Hi " + name)', 'body="Hi " + name)\n        except ToolDenied as e:\n'
        '            print("refused", e)')
    result, outbox, _ = await approved_run(program, deny={2: "not bob"})
    assert not result.is_error, result.text
    assert [m["to"] for m in outbox] == [
        f"{n}@example.com" for n in ["ann", "cy", "dee", "eve"]]
    [refused] = [line for line in result.value["logs"] if line.startswith("refused")]
    assert "not bob (plan approval " in refused and ", entry 2)" in refused


@pytest.mark.slow
async def test_a_call_that_leaves_the_plan_pauses_on_that_call_alone() -> None:
    program = FIVE_MAILS
    outbox: list[dict[str, Any]] = []
    session = Session(tools=mailbox_tools(outbox), log=MemoryLog())
    mode = Policy.from_data(POLICY).apply(session)
    try:
        plan = await mode.plan(textwrap.dedent(program))
        approval = approve_plan(mode, plan)
        changed = msgspec.structs.replace(approval, code=textwrap.dedent(
            program.replace('"eve"', '"mallory"')))
        with pytest.raises(ResumeTampered):
            await run_approved(mode, changed)                # the seal binds the program
        assert outbox == []
        # the same approval, with the last entry's arguments no longer what the run sends
        last = approval.entries[-1]
        sealed = approve_plan(mode, msgspec.structs.replace(plan, entries=[
            *plan.entries[:-1],
            msgspec.structs.replace(plan.entries[-1], arguments={**last.arguments,
                                                                 "to": "x@example.com"})]))
        result = await run_approved(mode, sealed)
        value = thaw(result.value)
        assert value["status"] == "pending", result.text
        [request] = value["approvals"]
        assert request["arguments"]["to"] == "eve@example.com"
        assert len(outbox) == 4
    finally:
        await session.aclose()


BRANCHING = """\
    if send_email(to="a@example.com", subject="s", body="b"):   # "" in the dry run
        send_email(to="extra@example.com", subject="s", body="b")
    send_email(to="z@example.com", subject="s", body="b")
    print("done")
    """


@pytest.mark.slow
async def test_after_a_pause_on_a_call_the_plan_lacked_the_approval_still_answers_the_rest(
        ) -> None:
    outbox: list[dict[str, Any]] = []
    session = Session(tools=mailbox_tools(outbox), log=MemoryLog())
    mode = Policy.from_data(POLICY).apply(session)
    try:
        plan = await mode.plan(textwrap.dedent(BRANCHING))
        assert [e.arguments["to"] for e in plan.entries] == ["a@example.com", "z@example.com"]
        paused = thaw((await run_approved(mode, approve_plan(mode, plan))).value)
        [request] = paused["approvals"]                  # the call the plan did not show
        assert request["arguments"]["to"] == "extra@example.com"
        done = await session.resume(paused["run_id"], {request["id"]: True})
        value = thaw(done.value)
        assert value.get("status") != "pending", value      # z: answered by the approval
        assert value["logs"] == ["done\n"]
        assert [m["to"] for m in outbox] == ["a@example.com", "extra@example.com",
                                             "z@example.com"]
        decided = [e.by for e in session.log.read() if isinstance(e, events.ApprovalDecided)]
        assert [by.rsplit(", ", 1)[-1] if isinstance(by, str) else None
                for by in decided] == ["entry 1", "entry 2"]
        assert approval_problems(session.log.read(), mode.seal_key) == []   # one run
    finally:
        await session.aclose()


@pytest.mark.slow
async def test_an_approval_is_used_by_one_run_of_the_log_whatever_its_outcome() -> None:
    outbox: list[dict[str, Any]] = []
    log = MemoryLog()
    session = Session(tools=mailbox_tools(outbox), log=log)
    mode = Policy.from_data(POLICY).apply(session)
    try:
        program = textwrap.dedent(FIVE_MAILS)
        approval = approve_plan(mode, await mode.plan(program))
        first = await run_approved(mode, approval)
        assert not first.is_error and len(outbox) == 5, first.text
        size = len(log.read())
        with pytest.raises(ApprovalUsed, match="already used by the run") as refused:
            await run_approved(mode, approval)
        assert isinstance(refused.value, ResumeTampered) and refused.value.code == \
            "APPROVAL_USED"
        assert len(outbox) == 5 and len(log.read()) == size        # nothing ran or logged
        [marker] = [e for e in log.read() if isinstance(e, events.CodeApprovalUsed)]
        assert (marker.approval_id, marker.approval_seal) == (approval.id, approval.seal)

        # a run that fails uses its approval all the same: its marker comes before the program
        other = approve_plan(mode, await mode.plan(program))
        planned = mode.limits
        mode.limits = msgspec.structs.replace(planned, fuel=1)       # it runs out at once
        failed = await run_approved(mode, other)
        assert failed.is_error and len(outbox) == 5, failed.text
        mode.limits = planned
        with pytest.raises(ApprovalUsed):
            await run_approved(mode, other)
        assert len(outbox) == 5
    finally:
        await session.aclose()


@pytest.mark.slow
async def test_two_runs_of_one_approval_at_once_send_each_mail_once() -> None:
    outbox: list[dict[str, Any]] = []
    session = Session(tools=mailbox_tools(outbox), log=MemoryLog())
    mode = Policy.from_data(POLICY).apply(session)
    try:
        approval = approve_plan(mode, await mode.plan(textwrap.dedent(FIVE_MAILS)))
        done = await asyncio.gather(run_approved(mode, approval), run_approved(mode, approval),
                                    return_exceptions=True)
        refused = [r for r in done if isinstance(r, ApprovalUsed)
                   or (not isinstance(r, BaseException) and r.is_error
                       and r.error is not None and r.error.code == "APPROVAL_USED")]
        assert len(refused) == 1, done
        assert [m["to"] for m in outbox] == [
            f"{n}@example.com" for n in ["ann", "bob", "cy", "dee", "eve"]]
    finally:
        await session.aclose()


QUOTA_PROGRAM = """\
    for name in ["ann", "bob", "cy", "dee"]:
        try:
            send_email(to=name + "@example.com", subject="hello", body="Hi")
        except ToolCallError as exc:
            print(exc.code, exc.message)
    """


@pytest.mark.slow
async def test_a_plan_counts_quota_use_from_the_log_and_its_earlier_entries() -> None:
    from codemode import PlanOverQuota, PlanQuota

    outbox: list[dict[str, Any]] = []
    session = Session(tools=mailbox_tools(outbox), log=MemoryLog())
    policy = {"quotas": [{"tool": "send_*", "per_run": 3, "per_session": 4}]}
    mode = Policy.from_data(policy).apply(session)
    # one send earlier in the session: it counts for the session, not for the next run
    sent = await session.call("run_code", {"code": 'send_email(to="x", subject="s", body="b")'})
    assert not sent.is_error, sent.text
    plan = await mode.plan(textwrap.dedent(QUOTA_PROGRAM))
    real = await session.call("run_code", {"code": textwrap.dedent(QUOTA_PROGRAM)})
    await session.aclose()
    assert [(e.decision, e.code) for e in plan.entries] == [
        ("allow", ""), ("allow", ""), ("allow", ""), ("deny", "QUOTA_EXCEEDED")]
    assert [[(q.measure, q.used, q.limit, q.exceeded) for q in e.quota]
            for e in plan.entries] == [
        [("per_run", 1, 3, False), ("per_session", 2, 4, False)],
        [("per_run", 2, 3, False), ("per_session", 3, 4, False)],
        [("per_run", 3, 3, False), ("per_session", 4, 4, False)],
        [("per_run", 3, 3, True), ("per_session", 4, 4, True)]]
    assert isinstance(plan.entries[0].quota[0], PlanQuota)
    assert plan.over_quota == [plan.entries[3]]
    # the dry run's program got the refusal the real run gives, word for word
    assert "".join(plan.value["logs"]) == "".join(real.value["logs"])
    assert "".join(real.value["logs"]).startswith("QUOTA_EXCEEDED quota exceeded for tool")
    assert plan.entries[3].reason in "".join(real.value["logs"])
    with pytest.raises(PlanOverQuota, match=r"exceeds a quota.*entry 4 \(send_email\)"):
        approve_plan(mode, plan)
    assert len(outbox) == 4       # the earlier send and the real run's three


@pytest.mark.slow
async def test_a_plan_within_its_quotas_is_approved_and_a_rule_denial_stays_denied() -> None:
    plan = await plan_of(QUOTA_PROGRAM, mailbox_tools([]), {
        "rules": [{"tool": "send_email", "action": "deny", "reason": "no",
                   "when": {"arg": "to", "matches": "^bob"}}],
        "quotas": [{"tool": "send_*", "per_run": 3}]})
    assert [(e.decision, e.code) for e in plan.entries] == [
        ("allow", ""), ("deny", "DENIED"), ("allow", ""), ("allow", "")]
    assert [e.quota[0].used for e in plan.entries] == [1, 1, 2, 3]
    assert plan.over_quota == []


@pytest.mark.slow
async def test_a_plan_counts_cost_units_against_a_budget() -> None:
    plan = await plan_of(QUOTA_PROGRAM, mailbox_tools([]), {
        "quotas": [{"tool": "send_*", "cost": 2, "cost_budget": 5}]})
    assert [(e.decision, [(q.measure, q.used, q.limit) for q in e.quota])
            for e in plan.entries] == [
        ("allow", [("cost_budget", 2, 5)]), ("allow", [("cost_budget", 4, 5)]),
        ("deny", [("cost_budget", 4, 5)]), ("deny", [("cost_budget", 4, 5)])]
    assert [e.n for e in plan.over_quota] == [3, 4]
    assert "allows 5 cost units per run, 4 used" in plan.entries[2].reason
