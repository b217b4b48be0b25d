"""A dry run's plan (docs/codemode.md "Plan before the run").

A dry run (`CodeMode.plan`) runs the program in the sandbox as usual. A tool that only
reads (`ToolDefinition.read_only`) runs for real, through the whole pipeline; a tool with
effects does not run: the program gets a simulated value instead, and the call becomes an
entry of the `Plan`, with what the policy's rules would do with it. What makes a value
simulated, in order: the definition's `simulate(args)`; else a value built from its
`output_schema` (`from_schema`); else the marker `SIMULATED` names. With quotas
(`mode.plan_quota`, which `Policy.apply` sets), each entry carries its quota use, counted
from the log plus the plan's earlier entries, and an entry past a quota is refused as the
real run would refuse it (code `QUOTA_EXCEEDED`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any, Literal

import msgspec

from codemode.pipeline import Allow, Ask, Deny, ToolDefinition
from codemode.sandbox import SubCall, SubCallErr, SubCallOk, SubCallOutcome

from .labels import RunFlow

__all__ = ["QUOTA_EXCEEDED", "SIMULATED", "Plan", "PlanEntry", "PlanFailed", "PlanOverQuota",
           "PlanQuota", "from_schema"]

QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
"""The code of an entry (and a call) refused because it would exceed a quota."""

SIMULATED = "$simulated"
"""The key of the marker a program receives for a simulated call whose tool has neither a
simulator nor an output schema: `{"$simulated": "<tool name>"}`."""

Decide = Callable[[str, Any, "RunFlow | None"], "Allow | Deny | Ask | None"]
"""The policy's rules for one call (`Policy.decide`): the first matching rule's decision."""

Verdict = Literal["allow", "ask", "deny"]


class PlanQuota(msgspec.Struct, frozen=True, kw_only=True):
    """The use of one quota limit by one plan entry.

    Attributes:
        index: the quota's position in the policy's `[[quotas]]` (`quotas[index]`).
        tool: the quota's tool glob (`"send_*"`).
        measure: "per_run", "per_session" (calls), "result_bytes" (bytes) or "cost_budget"
            (cost units).
        used: the use once this call has run (the log's use so far plus the plan's earlier
            entries plus this call; for a refused entry, the use without it), in the
            measure's unit.
        limit: the limit, in the same unit.
        exceeded: the call would pass the limit, so the real run would refuse it.
    """

    index: int
    tool: str
    measure: str
    used: int
    limit: int
    exceeded: bool = False


QuotaCheck = Callable[[str, "str | None", dict[str, int], bool],
                      "tuple[list[PlanQuota], str | None]"]
"""The policy's quotas for one planned call (`mode.plan_quota`, set by `Policy.apply`):
`(tool, run id of the dry run, calls the plan made so far by tool, whether the call would
run at all: False when a rule denies it)` to the call's `PlanQuota`s and the refusal
message when one is exceeded (None: within every quota)."""


class PlanOverQuota(ValueError):
    """A plan that would exceed a quota cannot be approved (`approve_plan`); `entries` are
    the entries past one."""

    def __init__(self, entries: list[PlanEntry]) -> None:
        listed = "; ".join(f"entry {e.n} ({e.tool}): {e.reason}" for e in entries)
        super().__init__(f"the plan exceeds a quota, so it cannot be approved: {listed}")
        self.entries = entries


class PlanEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One call with effects the program made in a dry run, in the order it made them.

    Attributes:
        n: the entry's number in the plan (1 for the program's first call with effects).
        tool, arguments: the call as the program made it.
        decision: what the policy would do: "allow" (a rule allows, or none matches), "ask"
            or "deny" (a rule denies, or the call would exceed a quota).
        code: the refusal's code when the entry is denied: "DENIED" (a rule) or
            "QUOTA_EXCEEDED"; "" otherwise.
        reason: the rule's reason, or the quota's message ("" when none matched or it gave
            none).
        labels: the labels the run held when it made the call (what label rules decide on).
        simulated: how the program's value was made: "simulator", "schema" or "marker".
        after_simulated: the program had received a simulated value before it made this
            call, so the call (its arguments, or its being made at all) may depend on a
            value the real run will not give.
        quota: the use of each quota limit that governs the tool (`PlanQuota`), in the
            policy's order; empty when none does.
        destructive: the call may destroy or overwrite something (True) or only adds
            (False), as the policy's `destructive`/`additive` lists, else the tool
            (`ToolDefinition.destructive`, an MCP `destructiveHint`) say; None: nobody said
            (MCP reads that as True).
        idempotent: calling again with the same arguments has no further effect (True), as
            the policy's `idempotent` list, else the tool, say; None: nobody said (MCP
            reads that as False).
    """

    n: int
    tool: str
    arguments: Any
    decision: Verdict
    code: str = ""
    reason: str = ""
    labels: list[str] = []
    simulated: Literal["simulator", "schema", "marker"] = "marker"
    after_simulated: bool = False
    quota: list[PlanQuota] = []
    destructive: bool | None = None
    idempotent: bool | None = None


class Plan(msgspec.Struct, kw_only=True):
    """What a program would do: its calls with effects, in order (`entries`).

    Attributes:
        code: the program.
        entries: one `PlanEntry` per call of a tool with effects (none ran).
        complete: False once the program received a simulated value: what it did after
            (the calls it made, `PlanEntry.after_simulated`, or did not make) may depend on
            it, so the real run may take another path and the plan may be incomplete.
        value: the dry run's value (`run_code`'s value; its stdout and result were made
            with simulated values).
    """

    code: str
    entries: list[PlanEntry] = []
    complete: bool = True
    value: Any = None

    def asked(self) -> list[PlanEntry]:
        """The entries the policy would ask about, in order."""
        return [e for e in self.entries if e.decision == "ask"]

    @property
    def over_quota(self) -> list[PlanEntry]:
        """The entries the real run would refuse because they exceed a quota, in order
        (empty: the plan is within every quota)."""
        return [e for e in self.entries if e.code == QUOTA_EXCEEDED]


PLANNING: contextvars.ContextVar[Plan | None] = contextvars.ContextVar(
    "codemode_planning", default=None)
"""The plan of the dry run the current task is making (`CodeMode.plan` sets it)."""


def from_schema(schema: Any, depth: int = 0) -> Any:
    """The simplest value `schema` (a JSON Schema) accepts, as far as it can tell: an
    object of its required properties, `[]`, `""`, `0`, `False`, `None`, a `const`, the
    first `enum` value or the first branch of `anyOf`/`oneOf`. Raises ValueError for a
    schema it cannot build from ($ref, or nesting past 20)."""
    if not isinstance(schema, dict) or depth > 20 or "$ref" in schema:
        raise ValueError("no value built from this schema")
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return from_schema(schema[key][0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else None
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties", {})
        return {name: from_schema(properties.get(name, {"type": "null"}), depth + 1)
                for name in schema.get("required", [])}
    simple = {"array": [], "string": "", "integer": 0, "number": 0,
              "boolean": False, "null": None}
    if kind in simple:
        return simple[kind]
    raise ValueError("no value built from this schema")


class Planner:
    """Answers a dry run's calls of tools with effects, and writes the plan.

    Args:
        plan: the plan the entries go to.
        decide: the policy's rules (`CodeMode.decide`), or None: every call "allow".
        flow: the run's labels (asked at each call).
        quota: the policy's quotas (`QuotaCheck`), or None: no quota.
        run_id: the dry run's id (its `run_code` call id), whose read-only calls count.
        effects: a tool's (destructive, idempotent) (`mode.effects`, `plan_effects`).
    """

    def __init__(self, plan: Plan, decide: Decide | None, flow: Callable[[], RunFlow],
                 quota: QuotaCheck | None = None, run_id: str | None = None,
                 effects: Effects | None = None) -> None:
        self.plan = plan
        self._effects = effects or plan_effects
        self._decide = decide
        self.flow = flow
        self._quota = quota
        self._run_id = run_id
        self.planned: dict[str, int] = {}   # calls the plan counts as made, by tool
        self.simulated = False          # a simulated value has reached the program

    def answer_for(self, definition: ToolDefinition) -> Callable[[SubCall], SubCallOutcome]:
        """The host answer to a call of `definition` (a tool with effects)."""

        def answer(call: SubCall) -> SubCallOutcome:
            if call.invalid is not None:
                return SubCallErr(id=call.id, code="INVALID_ARGS", message=call.invalid)
            flow = self.flow()
            decision = self._decide(definition.name, call.arguments, flow) \
                if self._decide is not None else None
            verdict: Verdict = ("deny" if isinstance(decision, Deny) else
                                "ask" if isinstance(decision, Ask) else "allow")
            reason = getattr(decision, "reason", None) or ""
            code = "DENIED" if verdict == "deny" else ""
            uses: list[PlanQuota] = []
            if self._quota is not None:     # asked before the rules, as in the real run
                uses, over = self._quota(definition.name, self._run_id, dict(self.planned),
                                         True)
                if over is not None:
                    verdict, code, reason = "deny", QUOTA_EXCEEDED, over
                elif verdict == "deny":      # the rule refuses it: it uses nothing
                    uses, _ = self._quota(definition.name, self._run_id,
                                          dict(self.planned), False)
            if verdict != "deny":
                self.planned[definition.name] = self.planned.get(definition.name, 0) + 1
            value, how = _simulated(definition, call.arguments)
            destructive, idempotent = self._effects(definition)
            self.plan.entries.append(PlanEntry(
                n=len(self.plan.entries) + 1, tool=definition.name, arguments=call.arguments,
                decision=verdict, code=code, reason=reason, labels=sorted(flow.by_label()),
                simulated=how, after_simulated=self.simulated, quota=uses,
                destructive=destructive, idempotent=idempotent))
            if code == QUOTA_EXCEEDED:
                return SubCallErr(id=call.id, code=QUOTA_EXCEEDED, message=reason)
            if verdict == "deny":
                return SubCallErr(id=call.id, code="DENIED",
                                  message=f"denied by policy: {reason}" if reason
                                  else f"denied by policy: {definition.name}")
            # what the program does next (more calls, fewer, none) may depend on the value
            self.simulated, self.plan.complete = True, False
            return SubCallOk(id=call.id, value=value)

        return answer


def _simulated(definition: ToolDefinition, arguments: Any) -> tuple[Any, Any]:
    if definition.simulate is not None:
        return definition.simulate(arguments), "simulator"
    if definition.output_schema is not None:
        try:
            return from_schema(definition.output_schema), "schema"
        except ValueError:
            pass
    return {SIMULATED: definition.name}, "marker"


def plan_read_only(definition: ToolDefinition) -> bool:
    """Whether a dry run runs `definition`'s tool (`CodeMode.read_only`; a policy's
    `read_only` and `effects` lists win over the definition's `read_only`)."""
    return definition.read_only


Effects = Callable[[ToolDefinition], "tuple[bool | None, bool | None]"]
"""A tool's (destructive, idempotent) as a plan shows them (None: not said)."""


def plan_effects(definition: ToolDefinition) -> tuple[bool | None, bool | None]:
    """(destructive, idempotent) of `definition`'s calls (`CodeMode.effects`; a policy's
    `destructive`, `additive` and `idempotent` lists win over the definition's)."""
    return definition.destructive, definition.idempotent


def dry_run(plan: Plan | None, definitions: list[ToolDefinition], exposed: dict[str, Any],
            host_answered: dict[str, Any], mode: Any, flow: Callable[[], RunFlow],
            run_id: str | None = None) -> dict[str, Any]:
    """For a run that makes `plan` (None: a real run, nothing changes): puts in
    `host_answered` a `Planner`'s answer for every exposed tool with effects
    (`mode.read_only` false; `mode.decide` and `mode.plan_quota` for the entries; `flow()`
    the run's labels; `run_id` the dry run's id), and returns the exposed tools left to the
    pipeline (the read-only ones)."""
    if plan is None:
        return exposed
    planner = Planner(plan, mode.decide, flow, getattr(mode, "plan_quota", None), run_id,
                      getattr(mode, "effects", None))
    for definition in definitions:
        if definition.name in exposed and not mode.read_only(definition):
            host_answered[definition.name] = planner.answer_for(definition)
    return {name: stub for name, stub in exposed.items()
                     if name not in host_answered}


async def make_plan(mode: Any, code: str, agent: str | None = None) -> Plan:
    """`CodeMode.plan`: a dry run of `code` through `mode`'s `run_code`."""
    plan = Plan(code=code)
    token = PLANNING.set(plan)
    try:
        result = await mode.session.call(mode.definition.name, {"code": code}, agent=agent)
    finally:
        PLANNING.reset(token)
    if result.is_error:
        message = result.error.message if result.error is not None else "failed"
        raise PlanFailed(f"dry run failed: {message}", plan=plan)
    plan.value = result.value
    return plan


class PlanFailed(Exception):
    """A dry run's program failed (or was refused); `plan` holds the entries it made."""

    def __init__(self, message: str, *, plan: Plan) -> None:
        super().__init__(message)
        self.plan = plan
