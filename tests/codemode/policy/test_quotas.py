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
