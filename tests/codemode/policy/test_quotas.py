"""Quota accounting (`codemode._policy.quotas`): validating `[[quotas]]` entries and the use
and limit of each quota one call touches, given the use so far."""

import msgspec
import pytest

from codemode._policy.quotas import QUOTA_EXCEEDED, Quota, Usage, quota_use


def test_code_is_stable():
    assert QUOTA_EXCEEDED == "QUOTA_EXCEEDED"


def test_fourth_call_of_a_glob_exceeds_a_per_run_quota_of_three():
    quotas = [Quota(tool="send_*", per_run=3)]
    under = quota_use(quotas, "send_mail", Usage(run_calls={"send_sms": 1, "send_mail": 1}))
    assert [(u.measure, u.used, u.limit, u.exceeded) for u in under] == [
        ("per_run", 2, 3, False)]
    over = quota_use(quotas, "send_sms", Usage(run_calls={"send_sms": 2, "send_mail": 1,
                                                           "read_mail": 9}))
    assert [(u.used, u.exceeded) for u in over] == [(3, True)]
    assert "quotas[0]" in over[0].message("send_sms") and "3 calls per run" in \
        over[0].message("send_sms")


@pytest.mark.parametrize("quota, measure, said", [
    (Quota(tool="send_*", per_run=1), "per_run", "allows 1 call per run"),
    (Quota(tool="send_*", per_session=1), "per_session", "allows 1 call per session"),
    (Quota(tool="send_*", cost_budget=1), "cost_budget", "allows 1 cost unit per run"),
    (Quota(tool="send_*", per_session=2), "per_session", "allows 2 calls per session"),
])
def test_a_limit_of_one_is_said_in_the_singular(quota, measure, said):
    usage = Usage(run_calls={"send_sms": 2}, session_calls={"send_sms": 2})
    [use] = [u for u in quota_use([quota], "send_sms", usage) if u.measure == measure]
    assert use.exceeded and said in use.message("send_sms")


def test_a_tool_no_glob_matches_touches_no_quota():
    assert quota_use([Quota(tool="send_*", per_run=0)], "read_mail", Usage()) == []


def test_session_bytes_and_cost_limits():
    quota = Quota(tool="get_*", per_session=5, result_bytes=100, cost=4, cost_budget=10)
    uses = {u.measure: u for u in quota_use([quota], "get_a", Usage(
        run_calls={"get_a": 2}, session_calls={"get_a": 4, "get_b": 1},
        run_result_bytes={"get_a": 99}))}
    assert (uses["per_session"].used, uses["per_session"].exceeded) == (5, True)
    assert (uses["result_bytes"].used, uses["result_bytes"].exceeded) == (99, False)
    assert (uses["cost_budget"].used, uses["cost_budget"].needs,
            uses["cost_budget"].exceeded) == (8, 4, True)
    assert "cost units per run" in uses["cost_budget"].message("get_a")


@pytest.mark.parametrize(("data", "words"), [
    ({"tool": "x", "per_run": -1}, "negative"),
    ({"tool": "x"}, "sets no limit"),
    ({"tool": "x", "per_run": 1, "cost": 2}, "cost_budget"),
    ({"tool": "x", "per_run": 1, "budget": 2}, "unknown field"),
])
def test_invalid_entries_are_refused(data, words):
    with pytest.raises(msgspec.ValidationError, match=words):
        msgspec.convert(data, Quota)


# ---- enforced by a policy, counted from the log ------------------------------------------

def quota_tools(counts: dict[str, int]) -> list:
    from codemode import tool

    @tool
    def send_mail(to: str) -> str:
        """Send a mail."""
        counts["send_mail"] = counts.get("send_mail", 0) + 1
        return f"sent to {to}"

    @tool
    def send_sms(to: str) -> str:
        """Send a text."""
        counts["send_sms"] = counts.get("send_sms", 0) + 1
        return f"texted {to}"

    @tool
    def approve_me() -> str:
        """Needs a person."""
        return "approved"

    return [send_mail, send_sms, approve_me]


QUOTA_POLICY = {"tier": "restricted-in-process",
                "rules": [{"tool": "approve_me", "action": "ask", "defer": True}],
                "quotas": [{"tool": "send_*", "per_run": 3}]}

PROGRAM = """
send_mail(to="a")
send_sms(to="b")
approve_me()
send_mail(to="c")
try:
    send_sms(to="d")
except Exception as e:
    print(type(e).__name__, e.code)
try:
    send_mail(to="e")
except Exception as e:
    print(type(e).__name__, e.code)
"""


def quota_session(log, counts):
    from codemode import Policy, Session
    session = Session(tools=quota_tools(counts), log=log)
    Policy.from_data(QUOTA_POLICY).apply(session)
    return session


@pytest.fixture(params=["jsonl", "db"])
def log_path(request, tmp_path):
    return tmp_path / f"session.{request.param}"


async def test_a_fourth_call_is_refused_with_the_code_also_after_a_pause_and_resume(log_path):
    from codemode.pipeline import ApprovalDecision
    counts: dict[str, int] = {}
    first = quota_session(log_path, counts)
    pending = await first.call("run_code", {"code": PROGRAM}, call_id="run1")
    assert pending.value["status"] == "pending", pending.text
    await first.aclose()
    assert counts == {"send_mail": 1, "send_sms": 1}

    second = quota_session(log_path, counts)      # a new session: counts come from the log
    [approval] = pending.value["approvals"]
    result = await second.resume("run1", [ApprovalDecision(id=approval["id"], approved=True)])
    await second.aclose()
    assert not result.is_error, result.text
    assert "".join(result.value["logs"]) == (
        "ToolCallError QUOTA_EXCEEDED\nToolCallError QUOTA_EXCEEDED\n")
    assert counts == {"send_mail": 2, "send_sms": 1}


async def test_concurrent_calls_share_the_quota_and_a_new_run_starts_afresh(tmp_path):
    counts: dict[str, int] = {}
    session = quota_session(tmp_path / "s.jsonl", counts)
    program = """
import asyncio
async def many():
    return await asyncio.gather(*(send_mail(to=str(i)) for i in range(5)),
                                return_exceptions=True)
out = asyncio.run(many())
[getattr(o, "code", "ok") for o in out]
"""
    for _ in range(2):
        result = await session.call("run_code", {"code": program})
        assert sorted(result.value["result"]) == ["QUOTA_EXCEEDED"] * 2 + ["ok"] * 3
    await session.aclose()
    assert counts == {"send_mail": 6}


def test_a_quota_for_a_tool_the_session_lacks_says_did_you_mean():
    from codemode import Policy, PolicyError, Session
    policy = Policy.from_data({"quotas": [{"tool": "send_mal", "per_run": 1}]})
    with pytest.raises(PolicyError, match=r"quotas\[0\].tool.*did you mean 'send_mail'"):
        policy.apply(Session(tools=quota_tools({})))


async def test_a_governed_call_does_not_read_the_log_again(tmp_path):
    """The quota's counts are kept as the log grows (seeded once from it), so a call's cost
    does not grow with the log: the log is loaded once for the whole run, not per call."""
    from codemode import Policy, Session
    from codemode.pipeline.log import JsonlLog

    loads = []

    class CountingLog(JsonlLog):
        def _load(self):
            loads.append(1)
            return super()._load()

    log = CountingLog(tmp_path / "s.jsonl")
    session = Session(tools=quota_tools({}), log=log)
    Policy.from_data({"tier": "restricted-in-process",
                      "quotas": [{"tool": "send_*", "per_session": 25}]}).apply(session)
    loads.clear()
    program = "for i in range(30):\n    try:\n        send_mail(to=str(i))\n" \
              "    except ToolCallError as e:\n        print(e.code)\n"
    result = await session.call("run_code", {"code": program})
    assert "".join(result.value["logs"]) == "QUOTA_EXCEEDED\n" * 5
    assert len(loads) <= 1
    await session.aclose()


@pytest.mark.parametrize("action", ["allow", "ask"])
async def test_a_rule_that_allows_or_asks_does_not_lift_the_quota(action):
    from codemode import Policy, Session
    from codemode.pipeline.log import MemoryLog
    counts: dict[str, int] = {}
    asked: list[str] = []
    session = Session(tools=quota_tools(counts), approval="ask", log=MemoryLog())
    session.on("approval/answer",        # a person who approves every call asked about
               lambda request, next: asked.append(request.tool_name) or "allowed-once")
    Policy.from_data({"tier": "restricted-in-process",
                      "rules": [{"tool": "send_*", "action": action}],
                      "quotas": [{"tool": "send_*", "per_run": 1}]}).apply(session)
    program = ('for to in "abc":\n    try:\n        print(send_mail(to=to))\n'
               '    except ToolCallError as e:\n        print(e.code)\n')
    result = await session.call("run_code", {"code": program})
    await session.aclose()
    assert not result.is_error, result.text
    assert "".join(result.value["logs"]) == "sent to a\nQUOTA_EXCEEDED\nQUOTA_EXCEEDED\n"
    assert counts == {"send_mail": 1}
    assert asked == (["send_mail"] if action == "ask" else [])   # not asked past the quota
