"""Policy as data: which sandbox tier, which limits, which tools a program sees and what the
pipeline decides for each of its calls (docs/design.md §7).

A policy file is TOML::

    tier = "wasm"                       # or "restricted" (a supervised worker process), or
                                        # "restricted-in-process" (trusted code only)
    expose = ["get_*", "add"]           # fnmatch globs over tool names; default ["*"]
    description_budget = 50000          # characters of run_code's description (the default)
    output_paging = true                # programs may page through a cut run's output
    type_check = "enforce"              # or "warn" or "off": ty checks each program first

    [limits]                            # sandbox.SandboxLimits fields, with their units
    wall_clock_s = 5
    memory_bytes = 268435456
    max_subcalls = 1000

    [[rules]]                           # first matching rule wins; no match: allow
    tool = "delete_*"
    action = "ask"                      # allow | deny | ask
    reason = "deleting needs a person's approval"

    [[rules]]
    tool = "send_*"
    action = "ask"
    defer = true                        # pause the run for the answer, even with an approver

    [[rules]]
    tool = "read_file"
    action = "deny"
    when = { arg = "path", matches = "^/etc/" }   # or a list of conditions (all must hold)
    optional = true                     # the session may lack read_file (no error, no warning)

Rules are checked against the session's tools when the policy is applied: a rule whose exact
name matches no tool is refused (`PolicyError`, "did you mean"), a glob that matches none is
a `PolicyWarning`, unless the rule says `optional = true`: a misspelt rule would otherwise
switch itself off without a word.

    [[labels]]                          # results of these tools carry these labels
    tool = "read_email"
    label = "private"                   # or a list of labels

    [[rules]]
    tool = "send_*"
    action = "ask"
    when = { run_has = "private" }      # the run received a result labelled so

A condition names one argument (`arg`, a top-level key; `a.b` walks into objects) and one
test: `equals` (==), `matches` (regular expression, `re.search` on a string), `contains`
(substring of a string, or item of a list), `gt` / `lt` (numbers). A missing argument, or
one of the wrong type, fails the test. A `run_has` condition (a label or a list of labels)
holds when the program's run has received a result carrying any of them (`_run/labels.py`); a
direct call is in no run, so it never holds there. A `run_has` label that no tool definition
and no `[[labels]]` entry gives is refused when the policy is applied ("did you mean"),
unless the condition says `optional = true` (a label given by a tool added later). The
reason of a rule that fired on labels names them and the calls that brought them, and any
argument holding a verbatim piece of such a result.

`Policy.apply(session)` builds the tier's sandbox, reserves `run_code` with the exposed
tools (which puts a session whose mode nobody chose in code mode, and makes the exposed
tools the only ones the model is offered directly in modes `both` and `native`: `CodeMode`),
and registers a `tools/pre-execute` listener for the rules. `deny` becomes
`Deny(reason)` and `ask` becomes `Ask(reason, defer=...)`. A program's call that needs an
approval pauses the run (the `run_code` result is pending and `Session.resume` goes on)
when the session has no approver mounted, or when the rule says `defer = true`; otherwise
the approver is asked while the run waits. A direct call with no approver mounted is
denied. A run could only pause for good in a session without a log, so there `apply`
refuses an `ask` rule that could pause one (`PolicyError`, before any call). Rules apply
to every call through the session (direct calls and sub-calls of programs), never to
`run_code` itself.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import re
import tomllib
import warnings
from pathlib import Path
from typing import Any, Literal

import msgspec
import msgspec.inspect

from codemode.pipeline import Allow, Ask, Deny, Session, ToolDefinition
from codemode.sandbox import Sandbox, SandboxLimits

from .._run.budget import DEFAULT_DESCRIPTION_BUDGET, MIN_DESCRIPTION_BUDGET
from .._run.labels import LabelRule, RunFlow, describe_evidence, describe_sources
from .._run.run_code import RUN_CODE, CodeMode
from .._run.seal import SealKey
from .._run.typecheck import DEFAULT_TYPE_CHECK, TypeCheck
from .bounded import TooLarge, read_bounded
from .conditions import Condition
from .quotas import Quota, plan_quota, quota_listener, session_usage

Tier = Literal["wasm", "restricted", "restricted-in-process"]
Action = Literal["allow", "deny", "ask"]



MAX_POLICY_BYTES = 1 << 20
"""The most a policy file may hold, in bytes (a policy is a few KiB of TOML)."""


class PolicyError(ValueError):
    """A policy file or value that cannot be used.

    Attributes:
        path: the policy file (None for a policy built in Python).
        key: the offending key as a path such as `rules[0].action` (None: the whole file).
        detail: what is wrong with it.
    """

    code = "POLICY_INVALID"

    def __init__(self, detail: str, *, path: str | os.PathLike[str] | None = None,
                 key: str | None = None) -> None:
        self.path = None if path is None else str(path)
        self.key = key
        self.detail = detail
        where = ": ".join(p for p in (self.path, key) if p)
        super().__init__(f"{where}: {detail}" if where else detail)


class PolicyWarning(UserWarning):
    """A policy rule that governs no tool of the session: its glob matches none (the CLI
    prints it on stderr as `codemode: warning: ...`)."""


class Rule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the pipeline decides for calls of the tools matching `tool`.

    Attributes:
        tool: an fnmatch glob over tool names, case-sensitive (`"*"`, `"get_*"`).
        action: "allow", "deny" or "ask".
        when: a condition, or a list of conditions that must all hold; none: always.
        reason: the denial / approval text (a default naming the tool when empty).
        defer: with `action = "ask"`: a program's call pauses its run for the answer even
            when an approver is mounted (`Ask(defer=True)`); the approval then comes with
            `Session.resume`, possibly from another process.
        optional: the session may lack the tool `tool` names (one policy for sessions with
            different toolsets). Without it, `Policy.apply` refuses a rule whose exact name
            matches no tool and warns about a glob that matches none: a misspelt rule would
            otherwise govern nothing, silently.
    """

    tool: str
    action: Action
    when: Condition | tuple[Condition, ...] | None = None
    reason: str = ""
    defer: bool = False
    optional: bool = False

    def __post_init__(self) -> None:
        if self.defer and self.action != "ask":
            raise ValueError("`defer`: only an `ask` rule can defer its approval")

    @property
    def conditions(self) -> tuple[Condition, ...]:
        if self.when is None:
            return ()
        return self.when if isinstance(self.when, tuple) else (self.when,)

    def applies(self, name: str, arguments: Any, flow: RunFlow | None = None) -> bool:
        """The rule matches the tool name and every condition holds (a `run_has` one on
        the labels `flow`, the call's run, holds; None: a direct call, which holds none)."""
        if not fnmatch.fnmatchcase(name, self.tool):
            return False
        held = flow.labels() if flow is not None and self.label_conditions else frozenset()
        return all(c.holds(arguments, held) for c in self.conditions)

    @property
    def label_conditions(self) -> frozenset[str]:
        """Every label the rule's `run_has` conditions name."""
        return frozenset().union(*(c.labels for c in self.conditions))

    def decision(self, name: str, arguments: Any = None,
                 flow: RunFlow | None = None) -> Allow | Deny | Ask:
        """The rule's decision for a call it applies to; when it fired on labels of
        `flow`, the reason names them, the calls that brought them, and the arguments
        that hold verbatim pieces of those calls' results."""
        if self.action == "allow":
            return Allow()
        reason = self.reason or (f'policy denies tool "{name}"' if self.action == "deny"
                                 else f'policy requires approval for tool "{name}"')
        held = self.label_conditions.intersection(flow.labels()) if flow is not None \
            else frozenset()
        if flow is not None and held:
            detail = "the run holds " + describe_sources(flow.sources(), held, flow.sub_call_id)
            evidence = flow.evidence(arguments, held)
            if evidence:
                detail += "; " + describe_evidence(evidence, flow.sub_call_id)
            reason = f"{reason} ({detail})"
        return Deny(reason) if self.action == "deny" else Ask(reason, defer=self.defer)


class Policy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A sandbox policy (see the module docstring for the file format).

    Attributes:
        tier: "wasm" (`sandbox.WasmSandbox`, the secure default), "restricted"
            (`sandbox.RestrictedProcessSandbox`: RestrictedPython in a supervised worker
            process) or "restricted-in-process" (`sandbox.RestrictedSandbox`, in this
            process, for trusted code only).
        limits: the limits of every run (`sandbox.SandboxLimits`, units in field names;
            `max_subcalls` and `max_concurrent_subcalls` bound the sub-calls).
        expose: fnmatch globs (case-sensitive) over the names of the session's tools;
            programs see the tools matching any of them, and the model is offered only
            those directly (modes `both` and `native`). A glob or name that matches no
            tool of the session is skipped (see `apply` for when that is an error).
        rules: per-tool rules, first match wins; a call no rule matches is allowed.
        labels: `[[labels]]` entries: the labels the results of matching tools carry (on
            top of each tool definition's own `labels`).
        quotas: `[[quotas]]` entries (`quotas.Quota`): calls per run and per session,
            result bytes and cost units per run of the tools a glob matches, counted from
            the session log; a call past one is refused with code `QUOTA_EXCEEDED`.
        output_paging: whether programs get `read_output` to page through the whole output
            of an earlier run that was cut (`CodeMode(output_paging=...)`); default False.
        description: what the policy is for, for people.
        description_budget: the most characters `run_code`'s description may have
            (`CodeMode(description_budget=...)`; default 50,000, at least 4,000); past it
            the description indexes the tools and programs find the rest with
            `search_tools` and `describe`.
        type_check: "enforce" (the default), "warn" or "off": `CodeMode(type_check=...)`,
            the check of each program against its tools' stubs before it runs.
        read_only, changes: fnmatch globs over tool names: the tools that only read, and
            those that change something, whatever their definitions say (`changes` wins
            over `read_only`, both over `ToolDefinition.read_only`): a dry run runs the
            first and plans the others (docs/codemode.md "Plan before the run").
        destructive, additive, idempotent: fnmatch globs over tool names: the tools whose
            calls may destroy or overwrite something, those that only add (`destructive`
            wins), and those a repeated call with the same arguments leaves as they were,
            whatever their definitions (`ToolDefinition.destructive`, `.idempotent`, an MCP
            tool's hints) say: a plan shows them per entry.
    """

    tier: Tier = "wasm"
    limits: SandboxLimits = SandboxLimits()
    expose: tuple[str, ...] = ("*",)
    rules: tuple[Rule, ...] = ()
    labels: tuple[LabelRule, ...] = ()
    quotas: tuple[Quota, ...] = ()
    output_paging: bool = False
    description: str = ""
    description_budget: int = DEFAULT_DESCRIPTION_BUDGET
    type_check: TypeCheck = DEFAULT_TYPE_CHECK
    read_only: tuple[str, ...] = ()
    changes: tuple[str, ...] = ()
    destructive: tuple[str, ...] = ()
    additive: tuple[str, ...] = ()
    idempotent: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.description_budget < MIN_DESCRIPTION_BUDGET:
            raise ValueError(f"`description_budget`: {self.description_budget} is below "
                             f"{MIN_DESCRIPTION_BUDGET}, the fewest characters a description "
                             "with an index of the tools needs")

    # ---- loading ------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Policy:
        """Read and validate a TOML policy file.

        Raises:
            PolicyError: the file is missing, not UTF-8, not TOML, or not a valid policy; the
                message names the file and the offending key (`rules[0].action`).
        """
        try:
            text = read_bounded(Path(path), MAX_POLICY_BYTES).decode("utf-8")
        except TooLarge:
            raise PolicyError(f"larger than {MAX_POLICY_BYTES >> 20} MiB, the most a policy "
                              "file may be", path=path) from None
        except OSError as exc:
            raise PolicyError(f"cannot read the policy file: {exc.strerror or exc}",
                              path=path) from None
        except UnicodeDecodeError as exc:
            raise PolicyError(f"not UTF-8 text (byte {exc.start}); save the policy as UTF-8",
                              path=path) from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise PolicyError(f"not valid TOML: {exc}", path=path) from None
        return cls.from_data(data, path=path)

    @classmethod
    def from_data(cls, data: Any, *, path: str | os.PathLike[str] | None = None) -> Policy:
        """Validate a policy given as plain data (what a TOML file decodes to).

        Raises:
            PolicyError: naming `path` (when given) and the offending key.
        """
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as exc:
            detail, key = _split_validation_message(str(exc))
            if detail.startswith("Invalid enum value") and key is not None:
                choices = _choices(cls, key)
                if choices:
                    detail += f"; expected one of {', '.join(repr(c) for c in choices)}"
            raise PolicyError(detail, path=path, key=key) from None

    # ---- applying -----------------------------------------------------------------------

    def build_sandbox(self) -> Sandbox:
        """A sandbox of this policy's tier.

        Raises:
            PolicyError: the restricted tier is not available in this installation.
        """
        if self.tier == "wasm":
            from codemode.sandbox import WasmSandbox
            return WasmSandbox()
        try:
            from codemode.sandbox import RestrictedProcessSandbox, RestrictedSandbox
        except ImportError as exc:
            raise PolicyError(f"the restricted tier is not available: {exc}",
                              key="tier") from None
        if self.tier == "restricted-in-process":
            return RestrictedSandbox()
        return RestrictedProcessSandbox()

    def exposed_names(self, session: Session, agent: str | None = None) -> list[str]:
        """Names of the session's visible tools matching `expose`, in registration order."""
        return [d.name for d in session.visible_tools(agent)
                if d.name != RUN_CODE
                and self._exposes(d.name)]

    def _exposes(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.expose)

    def decide(self, name: str, arguments: Any,
               flow: RunFlow | None = None) -> Allow | Deny | Ask | None:
        """The first matching rule's decision for one call, or None when no rule matches.

        Args:
            name, arguments: the call.
            flow: the labels of the run the call is a sub-call of (`CodeMode.flow_of`);
                None for a direct call.
        """
        for rule in self.rules:
            if rule.applies(name, arguments, flow):
                return rule.decision(name, arguments, flow)
        return None

    def apply(self, session: Session, *, sandbox: Sandbox | None = None,
              seal_key: SealKey | bytes | str | None = None) -> CodeMode:
        """Install the policy on `session`: `run_code` with this policy's tier, limits,
        labels and exposed tools (`expose` matched against the tools of each run, so that
        tools registered later, such as those an MCP server adds, follow it; a session whose
        mode nobody chose goes to code mode, and the exposed tools are the only ones offered
        directly: `CodeMode`), then the quotas (`quotas.quota_listener`) and the rules as
        `tools/pre-execute` listeners (registered now, first come first asked: a call past a
        quota is refused whatever a rule says; the rules read the labels of a sub-call's run
        from the `CodeMode`).

        Args:
            session: the session to govern.
            sandbox: a sandbox to use instead of building one for `tier` (the evaluator
                wraps the tier's sandbox to observe it).
            seal_key: the key sealing paused runs (`CodeMode(seal_key=...)`).
        Returns:
            The `CodeMode` that reserved `run_code`.
        Raises:
            PolicyError: an `ask` rule for a tool of the session could pause a run (it
                defers, or no approver is mounted now) and the session has no log
                (`Session(log=None)`, the default; `Session.log_chosen`): nothing could
                resume the paused run, so the policy refuses to start, before any call
                (key `rules[i].action`; a log file, an approver mounted first, or
                `log=MemoryLog()` to resume in this process will do). Or the tier is not
                available; or the session has tools and `expose` matches none of them (most
                likely a typo: `expose = []` says "none"); or a rule names a tool (an exact
                name, no glob) the session lacks and is not `optional` (the message
                suggests the closest names). A session with no tools is not checked.
        Warns:
            PolicyWarning: a rule's glob matches no tool of the session (not `optional`).
        """
        exposed = self.exposed_names(session)
        tools = [d.name for d in session.visible_tools() if d.name != RUN_CODE]
        if self.expose and tools and not exposed:
            raise PolicyError(f"{list(self.expose)} matches none of the session's tools "
                              f"({', '.join(tools)})", key="expose")
        if tools:
            for warning in self.check_rules(tools):
                warnings.warn(warning, PolicyWarning, stacklevel=2)
            self.check_labels(frozenset().union(
                *(d.labels for d in session.visible_tools() if d.name != RUN_CODE)))
        self._check_pauses_resumable(session, tools)
        chosen = sandbox if sandbox is not None else self.build_sandbox()
        resumable = True if any(r.defer for r in self.rules) else None
        mode = CodeMode(session, sandbox=chosen, limits=self.limits, expose=self._exposes,
                        resumable=resumable, labels=self.labels, seal_key=seal_key,
                        description_budget=self.description_budget,
                        output_paging=self.output_paging, type_check=self.type_check)
        if self.quotas:      # before the rules: a rule that allows or asks ends the chain
            usage = session_usage(session)      # one running count for both
            session.on("tools/pre-execute", quota_listener(self.quotas, usage))
            mode.plan_quota = plan_quota(self.quotas, usage)     # a dry run's entries
        if self.rules:
            session.on("tools/pre-execute", self._listener(mode))
            mode.decide = self.decide       # what a dry run's plan says of each call
        if self.read_only or self.changes:
            mode.read_only = self._reads_only
        if self.destructive or self.additive or self.idempotent:
            mode.effects = self._effects
        return mode

    def _reads_only(self, definition: ToolDefinition) -> bool:
        """Whether a dry run runs `definition`'s tool: `changes`, then `read_only`, then the
        definition say."""
        def matches(globs: tuple[str, ...]) -> bool:
            return any(fnmatch.fnmatchcase(definition.name, glob) for glob in globs)
        return not matches(self.changes) and (matches(self.read_only) or definition.read_only)

    def _effects(self, definition: ToolDefinition) -> tuple[bool | None, bool | None]:
        """(destructive, idempotent) of `definition`'s calls: `destructive`, then
        `additive`, then the definition say; `idempotent`, then the definition."""
        def matches(globs: tuple[str, ...]) -> bool:
            return any(fnmatch.fnmatchcase(definition.name, glob) for glob in globs)
        destructive = (True if matches(self.destructive) else False if matches(self.additive)
                       else definition.destructive)
        return destructive, True if matches(self.idempotent) else definition.idempotent

    def _check_pauses_resumable(self, session: Session, tools: list[str]) -> None:
        """Raises:
            PolicyError: an `ask` rule for one of `tools` could pause a run and the session
                has no log (see `apply`)."""
        if session.log_chosen:
            return
        approver = session.has_approver()
        for index, rule in enumerate(self.rules):
            if (rule.action == "ask" and (rule.defer or not approver)
                    and any(fnmatch.fnmatchcase(t, rule.tool) for t in tools)):
                why = ("it defers its approval" if rule.defer
                       else "the session has no approver mounted")
                raise PolicyError(
                    f"an `ask` rule for {rule.tool!r} would pause a program's run ({why}) in "
                    "a session without a log, where nothing could resume it: give it a log "
                    "file (--log FILE on the command line; Session(log=\"session.db\") in "
                    "Python, or Session(log=MemoryLog()) to resume in the same process)"
                    + ("" if rule.defer else ", or mount an approver before applying the "
                       "policy"),
                    key=f"rules[{index}].action")

    def check_rules(self, tools: list[str]) -> list[str]:
        """Check each rule's and each `[[labels]]` entry's `tool` against the session's
        tool names (a misspelt entry would otherwise govern, or label, nothing).

        Returns:
            One warning text per glob (of an entry that is not `optional`) that matches none
            of `tools`.
        Raises:
            PolicyError: an entry that is not `optional` names an exact tool not in `tools`;
                key `rules[i].tool` or `labels[i].tool`, with "did you mean" the closest
                names.
        """
        entries = [(f"rules[{i}].tool", "a rule", r.tool, r.optional)
                   for i, r in enumerate(self.rules)]
        entries += [(f"labels[{i}].tool", "a [[labels]] entry", e.tool, e.optional)
                    for i, e in enumerate(self.labels)]
        entries += [(f"quotas[{i}].tool", "a [[quotas]] entry", q.tool, q.optional)
                    for i, q in enumerate(self.quotas)]
        found: list[str] = []
        for key, what, pattern, optional in entries:
            if optional or any(fnmatch.fnmatchcase(t, pattern) for t in tools):
                continue
            if not _GLOB.search(pattern):
                close = difflib.get_close_matches(pattern, tools, n=3, cutoff=0.6)
                hint = (f"; did you mean {' or '.join(repr(c) for c in close)}?" if close
                        else f" ({', '.join(tools)})")
                raise PolicyError(
                    f"{pattern!r} is not a tool of this session{hint} ({what} for a tool "
                    "the session may lack says `optional = true`)", key=key)
            found.append(f"policy {key}: {pattern!r} matches no tool of this session")
        return found

    def check_labels(self, given: frozenset[str]) -> None:
        """Check each `run_has` label against the labels something can give: `given` (the
        session's tool definitions') and every `[[labels]]` entry's.

        Raises:
            PolicyError: a `run_has` condition that is not `optional` names a label nothing
                gives (key `rules[i].when`, with "did you mean" the closest labels, case
                differences first): the rule could never fire.
        """
        known = given.union(*(entry.labels for entry in self.labels))
        for index, rule in enumerate(self.rules):
            for condition in rule.conditions:
                for label in sorted(condition.labels - known):
                    if condition.optional:
                        continue
                    same = [k for k in sorted(known) if k.casefold() == label.casefold()]
                    close = same or difflib.get_close_matches(label, sorted(known), n=3,
                                                              cutoff=0.6)
                    hint = (f"; did you mean {' or '.join(repr(c) for c in close)}?" if close
                            else f" (labels given: {', '.join(sorted(known)) or 'none'})")
                    raise PolicyError(
                        f"`run_has` label {label!r} is given by no tool and no [[labels]] "
                        f"entry, so the rule for {rule.tool!r} could never fire{hint} (a "
                        "label given later says `optional = true` in its condition)",
                        key=f"rules[{index}].when")

    def _listener(self, mode: CodeMode) -> Any:
        async def enforce_policy_rules(execution: Any, next: Any) -> Any:
            if execution.name != RUN_CODE:
                decision = self.decide(execution.name, execution.arguments,
                                       mode.flow_of(execution))
                if decision is not None:
                    return decision
            return await next()

        return enforce_policy_rules


_GLOB = re.compile(r"[*?\[]")
_AT = re.compile(r"^(?P<detail>.*) - at `\$(?P<key>[^`]*)`$", re.S)
_FIELD = re.compile(r"^Object (?:contains unknown|missing required) field `(?P<name>[^`]+)`")
_OWN_FIELD = re.compile(r"^`(?P<name>\w+)`: ")      # our __post_init__ errors name a field


def _choices(kind: Any, key: str) -> tuple[Any, ...]:
    """The values a Literal field at `key` (such as `rules[0].action`) allows; () if none."""
    info: Any = msgspec.inspect.type_info(kind)
    for part in re.findall(r"[^.\[\]]+", key):
        while isinstance(info, msgspec.inspect.UnionType):     # `X | tuple[X, ...] | None`
            info = next((t for t in info.types
                         if isinstance(t, (msgspec.inspect.StructType,
                                           msgspec.inspect.LiteralType))
                         or (part.isdigit() and hasattr(t, "item_type"))), None)
        if part.isdigit() and hasattr(info, "item_type"):
            info = info.item_type
        elif isinstance(info, msgspec.inspect.StructType):
            field = next((f for f in info.fields if f.encode_name == part or f.name == part),
                         None)
            if field is None:
                return ()
            info = field.type
        else:
            return ()
    while isinstance(info, msgspec.inspect.UnionType):
        info = next((t for t in info.types if isinstance(t, msgspec.inspect.LiteralType)), None)
    return tuple(info.values) if isinstance(info, msgspec.inspect.LiteralType) else ()


def _split_validation_message(text: str) -> tuple[str, str | None]:
    """("detail", "rules[0].action") from msgspec's "detail - at `$.rules[0].action`"."""
    match = _AT.match(text)
    detail, key = (match["detail"], match["key"].lstrip(".")) if match else (text, "")
    field = _FIELD.match(detail) or _OWN_FIELD.match(detail)
    if field is not None:
        key = f"{key}.{field['name']}" if key else field["name"]
        detail = _OWN_FIELD.sub("", detail)
    return detail.replace("`", "'"), key or None
