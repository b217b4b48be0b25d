"""Quota accounting: how many calls, result bytes and cost units a call of a tool would use
against each `[[quotas]]` entry that governs it.

An entry governs the tools its `tool` glob matches (fnmatch, case-sensitive, as rules do)::

    [[quotas]]
    tool = "send_*"
    per_run = 3            # calls of matching tools in one run_code run
    per_session = 10       # ... in the whole session
    result_bytes = 65536   # bytes of matching tools' results in one run
    cost = 2               # cost units one call of a matching tool costs
    cost_budget = 10       # cost units of matching tools in one run

This module does the arithmetic only: the caller gives the use so far (`Usage`, counted from
the session log so that a resumed or repaired run does not start afresh) and `quota_use`
says, for one call, the use and the limit of every quota the call touches and which the call
would exceed. `QUOTA_EXCEEDED` is the code a refusal carries.
"""

from __future__ import annotations

import fnmatch
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import msgspec

from codemode.pipeline import Deny, events

from .._run.plan import QUOTA_EXCEEDED, PlanQuota, QuotaCheck

__all__ = ["QUOTA_EXCEEDED", "Quota", "QuotaUse", "Usage", "UsageCounter", "plan_quota",
           "quota_listener", "quota_use", "session_usage", "usage_from_log"]

Measure = Literal["per_run", "per_session", "result_bytes", "cost_budget"]


class Quota(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One `[[quotas]]` entry.

    Attributes:
        tool: an fnmatch glob over tool names, case-sensitive (`"send_*"`); the limits count
            the calls of all matching tools together.
        per_run: the most calls of matching tools in one run (calls; None: no limit).
        per_session: the most calls of matching tools in the session (calls; None: none).
        result_bytes: the most bytes of matching tools' results in one run (bytes of the
            results' text; None: no limit). A call is refused once the run has used it up:
            a result's size is known only after the call.
        cost: the cost units one call of a matching tool costs (default 1 with
            `cost_budget`, else 0).
        cost_budget: the most cost units of matching tools in one run (None: no limit).
        optional: the session may lack the tools `tool` names (as for rules).
    Raises (at validation):
        ValueError: a negative number, an entry with no limit, or `cost` without
            `cost_budget`.
    """

    tool: str
    per_run: int | None = None
    per_session: int | None = None
    result_bytes: int | None = None
    cost: int | None = None
    cost_budget: int | None = None
    optional: bool = False

    def __post_init__(self) -> None:
        for field in ("per_run", "per_session", "result_bytes", "cost", "cost_budget"):
            value = getattr(self, field)
            if value is not None and value < 0:
                raise ValueError(f"`{field}`: {value} is negative; a quota counts from 0")
        if self.cost is not None and self.cost_budget is None:
            raise ValueError("`cost`: a cost counts against a `cost_budget`, which is missing")
        if all(getattr(self, f) is None
               for f in ("per_run", "per_session", "result_bytes", "cost_budget")):
            raise ValueError("`tool`: the quota sets no limit (per_run, per_session, "
                             "result_bytes or cost_budget)")

    @property
    def unit_cost(self) -> int:
        """Cost units of one call (`cost`, default 1)."""
        return 1 if self.cost is None else self.cost

    def governs(self, name: str) -> bool:
        """Whether the tool `name` matches `tool`."""
        return fnmatch.fnmatchcase(name, self.tool)


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """What has been used so far, by tool name.

    Attributes:
        run_calls: calls of each tool in the current run (refused calls not counted).
        session_calls: calls of each tool in the session, the current run included.
        run_result_bytes: bytes of each tool's results in the current run.
    """

    run_calls: Mapping[str, int] = msgspec.field(default_factory=dict)
    session_calls: Mapping[str, int] = msgspec.field(default_factory=dict)
    run_result_bytes: Mapping[str, int] = msgspec.field(default_factory=dict)


class QuotaUse(msgspec.Struct, frozen=True, kw_only=True):
    """The use and limit of one quota that one call touches.

    Attributes:
        index: the entry's position in `[[quotas]]` (`quotas[index]` in messages).
        quota: the entry.
        measure: which limit: "per_run", "per_session" (calls), "result_bytes" (bytes) or
            "cost_budget" (cost units).
        used: the use so far, in the measure's unit.
        limit: the limit, in the same unit.
        needs: what the call would add (1 call, the call's cost, or 0 bytes: a result's
            size is not known before the call).
    """

    index: int
    quota: Quota
    measure: Measure
    used: int
    limit: int
    needs: int

    @property
    def exceeded(self) -> bool:
        """Whether the call would pass the limit (for bytes: the run has used them up)."""
        if self.measure == "result_bytes":
            return self.used >= self.limit
        return self.used + self.needs > self.limit

    def message(self, name: str) -> str:
        """The refusal text for a call of `name` that exceeds this quota."""
        unit = {"result_bytes": "result byte", "cost_budget": "cost unit"}.get(
            self.measure, "call") + ("" if self.limit == 1 else "s")
        scope = "session" if self.measure == "per_session" else "run"
        return (f'quota exceeded for tool "{name}": quotas[{self.index}] '
                f'({self.quota.tool!r}) allows {self.limit} {unit} per {scope}, '
                f"{self.used} used")


def quota_use(quotas: tuple[Quota, ...] | list[Quota], name: str,
              usage: Usage) -> list[QuotaUse]:
    """The use and limit of each quota a call of the tool `name` touches, in entry order
    (per_run, per_session, result_bytes, cost_budget within an entry).

    Args:
        quotas: the policy's `[[quotas]]` entries.
        name: the called tool.
        usage: the use so far (counted from the session log by the caller).
    Returns:
        One `QuotaUse` per limit of each entry whose glob matches `name`; the call is
        refused when any is `exceeded`. Empty when no quota governs the tool.
    """
    found: list[QuotaUse] = []
    for index, quota in enumerate(quotas):
        if not quota.governs(name):
            continue

        def total(counts: Mapping[str, int], quota: Quota = quota) -> int:
            return sum(n for tool, n in counts.items() if quota.governs(tool))

        if quota.per_run is not None:
            found.append(QuotaUse(index=index, quota=quota, measure="per_run",
                                  used=total(usage.run_calls), limit=quota.per_run, needs=1))
        if quota.per_session is not None:
            found.append(QuotaUse(index=index, quota=quota, measure="per_session",
                                  used=total(usage.session_calls), limit=quota.per_session,
                                  needs=1))
        if quota.result_bytes is not None:
            found.append(QuotaUse(index=index, quota=quota, measure="result_bytes",
                                  used=total(usage.run_result_bytes),
                                  limit=quota.result_bytes, needs=0))
        if quota.cost_budget is not None:
            spent = sum(n * quota.unit_cost for tool, n in usage.run_calls.items()
                        if quota.governs(tool))
            found.append(QuotaUse(index=index, quota=quota, measure="cost_budget",
                                  used=spent, limit=quota.cost_budget, needs=quota.unit_cost))
    return found


# a sub-call that ended with one of these never reached its tool: it uses no quota
_NOT_RUN = frozenset({"DENIED", QUOTA_EXCEEDED, "APPROVAL_PENDING", "ABORTED_BEFORE_DISPATCH",
                      "UNKNOWN_TOOL", "INVALID_ARGS"})
_RESUME = ":resume:"


def run_of(call_id: str) -> str:
    """The run id of a `run_code` call id: a resumption's `"<run id>:resume:<k>"` belongs to
    the run `"<run id>"`."""
    return call_id.split(_RESUME, 1)[0]


def call_key(sub_call_id: str) -> str:
    """The logical call a sub-call id is an attempt of: `"<run id>:<n>"`, its idempotency
    key, the same for every resumption that makes the call again (`"run1:resume:2:code:4"`
    -> `"run1:4"`), so a retry of a call whose outcome a crash left unknown is that call."""
    outer, _, n = sub_call_id.rpartition(":code:")
    return f"{run_of(outer)}:{n}"


def usage_from_log(log_events: Iterable[Any], run_id: str | None,
                   exclude: str | None = None) -> Usage:
    """The use so far, counted from the session log's events, so that a resumed or
    crash-repaired run goes on counting from what its earlier parts used.

    Args:
        log_events: the session log's events (`session.log.read()`).
        run_id: the run whose calls `Usage.run_calls` counts (its first `run_code` call id;
            its resumptions' sub-calls count too); None: none (a direct call).
        exclude: the id of the call being decided, whose own start is already logged (for
            a sub-call: every attempt of its logical call, `call_key`, is left out).
    Returns:
        A `Usage`: each logical sub-call (`call_key`) with an attempt that started
        (`tool/code-dispatch-start`) and did not end refused before its tool ran (denied,
        over quota, pending approval, unknown tool, invalid arguments) counts once, in its
        run and in the session: a call crash repair settled `TOOL_OUTCOME_UNKNOWN` counts
        (it may have run), and so does, once, a later resumption's retry of it; each direct
        `tool/call` counts in the session unless it ended `QUOTA_EXCEEDED`; result bytes are
        those of the run's sub-call results' content encoded as JSON.
    """
    attempts: dict[str, str] = {}                 # sub_call_id -> its logical call
    calls: dict[str, tuple[str, str]] = {}        # logical call -> (name, run id)
    refused: set[str] = set()
    direct: dict[str, str] = {}
    run_bytes: dict[str, int] = {}
    skip = call_key(exclude) if exclude is not None and ":code:" in exclude else None
    for event in log_events:
        if isinstance(event, events.CodeDispatchStart):
            key = call_key(event.sub_call_id)
            if key != skip:
                attempts[event.sub_call_id] = key
                calls[key] = (event.name, run_of(event.parent_call_id))
        elif isinstance(event, events.CodeDispatch):
            if event.code in _NOT_RUN:
                refused.add(event.sub_call_id)
            elif run_id is not None and run_of(event.parent_call_id) == run_id:
                run_bytes[event.name] = (run_bytes.get(event.name, 0)
                                         + len(msgspec.json.encode(event.content)))
        elif isinstance(event, events.ToolCall):
            if event.call_id != exclude and event.name != "run_code":
                direct[event.call_id] = event.name
        elif (isinstance(event, events.ToolResult) and event.error is not msgspec.UNSET
              and event.error.code == QUOTA_EXCEEDED):
            direct.pop(event.call_id, None)
    ran = {key for sub_call_id, key in attempts.items() if sub_call_id not in refused}
    run_calls: dict[str, int] = {}
    session_calls: dict[str, int] = {}
    for key in ran:
        name, run = calls[key]
        session_calls[name] = session_calls.get(name, 0) + 1
        if run_id is not None and run == run_id:
            run_calls[name] = run_calls.get(name, 0) + 1
    for name in direct.values():
        session_calls[name] = session_calls.get(name, 0) + 1
    return Usage(run_calls=run_calls, session_calls=session_calls,
                 run_result_bytes=run_bytes)


class UsageCounter:
    """The use so far, kept as the log grows (`see` each event, in order): `usage` gives what
    `usage_from_log` would over the same events, at a cost that does not grow with the log.
    Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts: dict[str, str] = {}           # started sub-call -> logical call
        self._live: dict[str, set[str]] = {}          # logical call -> attempts not refused
        self._calls: dict[str, tuple[str, str]] = {}  # logical call -> (name, run id)
        self._run: dict[str, dict[str, int]] = {}     # run id -> name -> calls
        self._session: dict[str, int] = {}            # name -> calls
        self._bytes: dict[str, dict[str, int]] = {}   # run id -> name -> result bytes
        self._direct: dict[str, str] = {}             # direct call id -> name

    def _count(self, name: str, run: str | None, n: int) -> None:
        self._session[name] = self._session.get(name, 0) + n
        if run is not None:
            counts = self._run.setdefault(run, {})
            counts[name] = counts.get(name, 0) + n

    def see(self, event: Any) -> None:
        """Count one log event (each event once, in log order)."""
        kind = type(event)
        with self._lock:
            if kind is events.CodeDispatchStart:
                key = call_key(event.sub_call_id)
                self._attempts[event.sub_call_id] = key
                live = self._live.setdefault(key, set())
                if not live:
                    self._calls[key] = (event.name, run_of(event.parent_call_id))
                    self._count(event.name, self._calls[key][1], 1)
                live.add(event.sub_call_id)
            elif kind is events.CodeDispatch:
                key = self._attempts.pop(event.sub_call_id, "")
                if event.code in _NOT_RUN:
                    attempts = self._live.get(key, set())
                    if event.sub_call_id in attempts:
                        attempts.discard(event.sub_call_id)
                        if not attempts:
                            name, run = self._calls[key]
                            self._count(name, run, -1)
                else:
                    found = self._bytes.setdefault(run_of(event.parent_call_id), {})
                    found[event.name] = (found.get(event.name, 0)
                                         + len(msgspec.json.encode(event.content)))
            elif kind is events.ToolCall:
                if event.name != "run_code":
                    self._direct[event.call_id] = event.name
                    self._count(event.name, None, 1)
            elif (kind is events.ToolResult and event.call_id in self._direct
                  and event.error is not msgspec.UNSET and event.error.code == QUOTA_EXCEEDED):
                self._count(self._direct.pop(event.call_id), None, -1)

    def usage(self, run_id: str | None, exclude: str | None = None) -> Usage:
        """The use so far (as `usage_from_log(events, run_id, exclude)`)."""
        with self._lock:
            run = dict(self._run.get(run_id, {})) if run_id is not None else {}
            session = dict(self._session)
            found = dict(self._bytes.get(run_id, {})) if run_id is not None else {}
            if exclude is not None and ":code:" in exclude:
                key = call_key(exclude)
                if self._live.get(key):
                    name, of = self._calls[key]
                    session[name] -= 1
                    if of == run_id:
                        run[name] -= 1
            elif exclude is not None and exclude in self._direct:
                session[self._direct[exclude]] -= 1
        return Usage(run_calls={k: n for k, n in run.items() if n},
                     session_calls={k: n for k, n in session.items() if n},
                     run_result_bytes=found)


UsageOf = Callable[[str | None, str | None], Usage]
"""`(run id, call left out) -> Usage`: a session's use so far (`session_usage`)."""


def session_usage(session: Any) -> UsageOf:
    """The use so far in `session`, as `usage_from_log(session.log.read(), run_id,
    exclude)` says, kept by a `UsageCounter` seeded with the log's events at the first
    question and kept up with each event appended after (`log.watch`), so that its cost
    stays flat as the log grows; a log without `watch` is read whole at each question."""
    counter: list[UsageCounter] = []

    def usage(run_id: str | None, exclude: str | None) -> Usage:
        log = session.log
        if not hasattr(log, "watch"):
            return usage_from_log(log.read(), run_id, exclude=exclude)
        if not counter:
            counter.append(UsageCounter())
            log.watch(counter[0].see)
        return counter[0].usage(run_id, exclude)

    return usage


def quota_listener(quotas: tuple[Quota, ...], usage: UsageOf) -> Any:
    """A `tools/pre-execute` listener refusing, with `Deny(code="QUOTA_EXCEEDED")`, a call
    that would exceed one of `quotas`, counting with `usage` (`session_usage`, from the
    session log). `Policy.apply` registers it before the rules' listener."""
    async def enforce_quotas(execution: Any, next: Any) -> Any:
        name = execution.name
        if name != "run_code" and any(q.governs(name) for q in quotas):
            call_id = execution.call_id
            outer, is_sub, _ = call_id.rpartition(":code:")
            for use in quota_use(quotas, name, usage(run_of(outer) if is_sub else None,
                                                      call_id)):
                if use.exceeded and (is_sub or use.measure == "per_session"):
                    return Deny(use.message(name), code=QUOTA_EXCEEDED)
        return await next()

    return enforce_quotas


def plan_quota(quotas: tuple[Quota, ...], usage: UsageOf) -> QuotaCheck:
    """The quotas of a dry run's planned calls (`CodeMode.plan_quota`; `Policy.apply` sets
    it): for a call of `name` in the dry run `run_id`, after the calls `planned` (by tool)
    the plan counts as made, the `PlanQuota` of each limit that governs it (its use with the
    call when `runs` and no limit is exceeded, else without) and the refusal message of the
    first it would exceed (None: within all, or the call does not run). The use so far is
    the log's (`usage`, `session_usage`: the session's calls, and the dry run's own
    read-only calls, which the real run makes too) plus `planned`, which never ran and so
    are not in the log."""
    def check(name: str, run_id: str | None, planned: dict[str, int], runs: bool
              ) -> tuple[list[PlanQuota], str | None]:
        if not any(q.governs(name) for q in quotas):
            return [], None
        logged = usage(run_id, None)
        run_calls, session_calls = dict(logged.run_calls), dict(logged.session_calls)
        for tool, n in planned.items():
            run_calls[tool] = run_calls.get(tool, 0) + n
            session_calls[tool] = session_calls.get(tool, 0) + n
        so_far = Usage(run_calls=run_calls, session_calls=session_calls,
                       run_result_bytes=logged.run_result_bytes)
        uses = quota_use(quotas, name, so_far)
        over = next((u for u in uses if u.exceeded), None) if runs else None
        adds = runs and over is None
        return ([PlanQuota(index=u.index, tool=u.quota.tool, measure=u.measure,
                           used=u.used + (u.needs if adds else 0), limit=u.limit,
                           exceeded=runs and u.exceeded) for u in uses],
                None if over is None else over.message(name))

    return check
