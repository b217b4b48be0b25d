"""The reserved `run_code` tool (docs/design.md §1, §4; docs/pipeline-spec.md §11).

`CodeMode(session)` reserves `run_code` on a session. Its body runs the program in a sandbox
with one binding per tool visible to the calling agent, serves the program's sub-calls
through the same pipeline (`dispatch.py`), drains them, and returns the canonical value
`{"logs": [str], "result"?: JSON, "cut"?: [...], "subcalls": {...}}`; a program that fails becomes a
`CODE_RUN_FAILED` failure whose message is `code run failed (<kind>): <message>` followed by
the captured output.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from msgspec import UNSET

from codemode.pipeline import (
    HarnessError,
    RunContext,
    Session,
    Signal,
    ToolDefinition,
    events,
)
from codemode.sandbox import (
    FullOutput,
    ParamSpec,
    RunOutcome,
    RunRequest,
    Sandbox,
    SandboxLimits,
    SandboxUnavailable,
    Tape,
    ToolSpec,
    WasmSandbox,
)

from .approval_uses import follow as follow_approval
from .budget import DEFAULT_DESCRIPTION_BUDGET, MIN_DESCRIPTION_BUDGET
from .description import run_code_description
from .discovery import DISCOVERY_NAMES, DISCOVERY_SPECS, ToolIndex
from .dispatch import HostAnswer, SubCallDispatcher
from .labels import LabelRule, RunFlow, RunFlows, labeller, no_labels
from .output import FullOutputs, OnRunOutput, cut_json, loop_output
from .paging import READ_OUTPUT, READ_OUTPUT_SPEC, page_reader
from .plan import PLANNING, Decide, Effects, Plan, QuotaCheck, dry_run, make_plan, plan_read_only
from .render import _failure_message, _labels_line, _render
from .replay import ReplayDiverged, earlier_answers
from .resumed import Replay, replay_of
from .resumptions import record_seal, uses_of
from .seal import ResumeTampered, SealKey, SealKeyError
from .stubs import ToolStub, build_stubs
from .typecheck import DEFAULT_TYPE_CHECK, TypeCheck, TypeChecker, TypeCheckError, warned
from .waiting import ended, run_waiters

RUN_CODE = "run_code"

REMEMBERED_RUNS = 1024
"""Finished runs whose labels `CodeMode.labels` still knows (per `CodeMode`)."""

RUN_CODE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "The Python program to run."},
        "description": {"type": "string",
                        "description": "A short title for what the program does."},
    },
    "required": ["code"],
    "additionalProperties": False,
}


class _RunCodeArguments(msgspec.Struct, forbid_unknown_fields=True):
    """`RUN_CODE_PARAMETERS` as a Struct: msgspec's compiled check of a call's arguments."""

    code: str
    description: str | msgspec.UnsetType = UNSET


def _arguments_fit(args: Any) -> bool:
    """Whether `args` fits `RUN_CODE_PARAMETERS` (the registry's fast path; on False the
    JSON Schema validator says what is wrong)."""
    try:
        msgspec.convert(args, _RunCodeArguments)
    except (msgspec.ValidationError, TypeError):
        return False
    return True

# Keys in insertion order: a schema reordered in place only misses the cache (a third
# cheaper to encode than sorted keys, and every run encodes its tools' schemas).
_STUB_KEY = msgspec.json.Encoder()
_STUB_CACHE_SIZE = 8            # sets of tool definitions whose stubs are kept
_TYPE_CHECKS = ("off", "warn", "enforce")


class CodeRunFailed(HarnessError):
    """The program did not complete: `code run failed (<kind>): <message>`, then its
    traceback and captured output, each bounded by `MODEL_TEXT_CHARS`.

    Attributes:
        outcome: the sandbox's whole `RunOutcome` (full stdout and stderr, up to the
            run's output limit); None when no run took place.
    """

    code = "CODE_RUN_FAILED"

    def __init__(self, message: str, *, outcome: RunOutcome | None = None) -> None:
        super().__init__(message)
        self.outcome = outcome


def _tool_spec(stub: ToolStub) -> ToolSpec:
    return ToolSpec(
        name=stub.name, alias=stub.alias, accepts_extra=stub.accepts_extra,
        doc=stub.doc_text(), signature=stub.signature,
        params=tuple(ParamSpec(name=p.name, required=p.required, omit_if_none=p.omit_if_none,
                               keyword_only=p.keyword_only)
                     for p in stub.params))


def _nothing() -> None:
    """A disposer with nothing to undo."""


def _present_call(args: Any) -> dict[str, Any]:
    """The pending card: the description as title, the code as raw input (PIPELINE §11.2)."""
    args = args if isinstance(args, dict) else {}
    return {"title": args.get("description") or RUN_CODE, "input": args.get("code", "")}


class CodeMode:
    """Gives a session the reserved `run_code` tool (docs/design.md §1), and makes what the
    model is offered (`Session.model_tools`, so every adapter's tools) match code mode.

    The mode. A session whose mode nobody chose (`Session(mode=None)`, the default, and no
    `set_mode`) goes to code mode: the model is offered `run_code` alone, and a direct call
    of another tool fails `UNKNOWN_TOOL` ("call it inside a program"). A chosen mode is
    kept, also one chosen later: `"both"` offers the exposed tools and `run_code`;
    `"native"` offers the exposed tools and not `run_code`, which the host may still call
    itself (`session.call("run_code", ...)`): the model never sees it. `close()` gives the
    session back its earlier default.

    Args:
        session: the session whose tools programs may call and whose pipeline governs them.
        sandbox: the tier programs run in (default: a shared `WasmSandbox`).
        limits: limits of every run (default: `SandboxLimits()`).
        expose: the tools exposed to programs: their names, or a predicate over a tool's
            name, asked again as tools come and go (default: every visible tool). Given,
            they are also the only tools the model is offered, and may call, directly (in
            modes `both` and `native`; `Session.set_direct_tools`).
        resumable: whether runs record what they read from clocks and randomness, so that a
            run paused for approval replays exactly (about 0.2 ms more per run on the wasm
            tier, and no prepared instance from the pool). Default (None): when the session
            has a `tools/pre-execute` listener (what may answer `ask`: a policy's rules) and
            no approver, since then every `ask` pauses the run; set True when an approver
            is mounted but rules may say `defer = true`. A run that pauses unrecorded still
            resumes: its calls replay, and a program whose calls depend on the time or
            randomness may then stop with `REPLAY_DIVERGED`.
        labels: `LabelRule`s: the labels the results of matching tools carry, on top of
            each definition's own `labels` (a policy's `[[labels]]`). A run's labels (the
            union of those of every result it received) are in its value (`"labels"`)
            and, while it runs, `flow_of(execution)` of its sub-calls.
        seal_key: the key that seals the record of a paused run and checks it when the run
            is resumed (`RESUME_TAMPERED` when it does not match): a `SealKey`, or the key's
            bytes (at least 32). Default: `SealKey()` (the environment, else a key file
            made on first use; see `SealKey`).
        on_output: called with each piece of a run's stdout and stderr as the program
            prints it, `on_output(call_id, stream, text)` on the event loop's thread
            (`OnRunOutput`, docs/codemode.md "Output as it is printed"); also settable as
            the attribute `on_output`.
        output_paging: whether programs get `read_output(handle, part, offset, size)`, which
            reads the whole output of an earlier run of this `CodeMode` that was cut (its
            `full_output`), and the model reads that run's handle (docs/codemode.md, "Output
            over its limit"; a policy's `output_paging = true`). Default False: no such
            function, and no handle named.
        description_budget: the most characters `run_code`'s description may have
            (default `DEFAULT_DESCRIPTION_BUDGET`, 50,000). While the full listing fits,
            the description holds it; past it, an index of the tools and how a program
            finds the rest (`search_tools`, `describe`; `budget`). None: always the full
            listing, however long.
        type_check: "enforce" (the default), "warn" or "off": whether each program is
            checked with ty against the stubs of the tools it may call before it runs, and
            what an error does: "enforce" refuses the program (`TypeCheckFailed`, nothing
            runs), "warn" runs it and puts the errors in its value (`"type_errors"`) and in
            the text the model reads (docs/codemode.md "Type check before the run"). A
            resumed run is not checked again.

    Raises:
        ValueError: `description_budget` is below `MIN_DESCRIPTION_BUDGET` (4,000), or
            `type_check` is none of the three.
    """

    decide: Decide | None = None     # the rules a plan's entries say (`Policy.apply`)
    plan_quota: QuotaCheck | None = None     # the quotas a plan's entries count against
    effects: Effects | None = None     # a plan entry's destructive, idempotent (`Policy.apply`)
    read_only: Callable[[ToolDefinition], bool] = staticmethod(plan_read_only)

    def __init__(self, session: Session, *, sandbox: Sandbox | None = None,
                 limits: SandboxLimits | None = None,
                 expose: Sequence[str] | Callable[[str], bool] | None = None,
                 resumable: bool | None = None,
                 labels: Sequence[LabelRule] = (),
                 seal_key: SealKey | bytes | str | None = None,
                 on_output: OnRunOutput | None = None,
                 description_budget: int | None = DEFAULT_DESCRIPTION_BUDGET,
                 output_paging: bool = False,
                 type_check: TypeCheck = DEFAULT_TYPE_CHECK) -> None:
        if description_budget is not None and (
                type(description_budget) is not int
                or description_budget < MIN_DESCRIPTION_BUDGET):
            raise ValueError(f"description_budget must be an int of at least "
                             f"{MIN_DESCRIPTION_BUDGET} characters (or None), not "
                             f"{description_budget!r}")
        self.description_budget = description_budget
        self._indexes: dict[int, tuple[tuple[ToolStub, ...], ToolIndex]] = {}
        if type_check not in _TYPE_CHECKS:
            raise ValueError(f"type_check must be one of {', '.join(_TYPE_CHECKS)}, "
                             f"not {type_check!r}")
        self.type_check: TypeCheck = type_check
        self._checker = TypeChecker()
        self.session = session
        self.output_paging = output_paging
        self.on_output = on_output
        self._full = FullOutputs()
        self.label_rules = tuple(labels)
        self.flows = RunFlows()
        self._finished: dict[str, dict[str, list[str]]] = {}   # call id -> labels, oldest first
        self.seal_key = seal_key if isinstance(seal_key, SealKey) else SealKey(seal_key)
        self.sandbox: Sandbox = sandbox or WasmSandbox()
        self.limits = limits or SandboxLimits()
        self.resumable = resumable
        self._expose: Callable[[str], bool] | None = (
            expose if expose is None or callable(expose) else frozenset(expose).__contains__)
        self._stub_cache: dict[bytes, tuple[tuple[ToolStub, ...], tuple[ToolSpec, ...]]] = {}
        self._refreshing = False
        # before `run_code` is made: its description says whether the session is in code mode
        self._dispose_mode = session.set_default_mode("code")
        self._dispose_direct = (session.set_direct_tools(self._expose)
                                if self._expose is not None else _nothing)
        self._dispose_reserved = self._reserve()
        # The description lists the tools: keep it current as tools come and go.
        self._dispose_listener = session.on("tools/changed", lambda _session: self._refresh())

    def _reserve(self) -> Callable[[], None]:
        self.definition = ToolDefinition(
            name=RUN_CODE, description=self.description(), parameters=RUN_CODE_PARAMETERS,
            execute=self._execute, render=_render, present_call=_present_call, resumable=True,
            arguments_fit=_arguments_fit)
        return self.session.reserve(self.definition)

    def _refresh(self) -> None:
        if self._refreshing or self.definition.description == self.description():
            return
        self._refreshing = True                # disposing/reserving notifies again
        try:
            self._dispose_reserved()
            self._dispose_reserved = self._reserve()
        finally:
            self._refreshing = False

    def close(self) -> None:
        """Remove `run_code` from the session, and what it set there: the default mode and
        the tools offered directly."""
        self._dispose_listener()
        self._dispose_reserved()
        self._dispose_direct()
        self._dispose_mode()
        self._checker.close()

    # ---- what the model and the program see -------------------------------------------

    def exposed_tools(self, agent: str | None = None) -> list[ToolDefinition]:
        """Tools visible to `agent` that programs may call (never `run_code` itself)."""
        return [d for d in self.session.visible_tools(agent)
                if d.name != RUN_CODE and (self._expose is None or self._expose(d.name))]

    def stubs(self, agent: str | None = None) -> list[ToolStub]:
        return list(self._stubs_and_specs(agent)[0])

    def _stubs_and_specs(self, agent: str | None,
                         definitions: list[ToolDefinition] | None = None
                         ) -> tuple[tuple[ToolStub, ...], tuple[ToolSpec, ...]]:
        """The exposed tools' stubs and the specs the guest gets (of `definitions`, default
        `exposed_tools(agent)`), built once per set of definitions (building them is most
        of a small run's host work): keyed by each definition's JSON text, since a schema
        dict may change in place."""
        if definitions is None:
            definitions = self.exposed_tools(agent)
        tools = [(d.name, d.description, d.parameters, d.output_schema) for d in definitions]
        groups = [d.group for d in definitions]
        try:
            key: bytes | None = _STUB_KEY.encode([tools, groups])
        except (TypeError, ValueError, OverflowError):     # not JSON: built, not kept
            key = None
        built = self._stub_cache.get(key) if key is not None else None
        if built is None:
            stubs = tuple(msgspec.structs.replace(s, group=g) if g else s
                          for s, g in zip(build_stubs(tools), groups, strict=True))
            built = (stubs, tuple(_tool_spec(s) for s in stubs))
            if key is None:
                return built
            if len(self._stub_cache) >= _STUB_CACHE_SIZE:
                self._stub_cache.pop(next(iter(self._stub_cache)))
            self._stub_cache[key] = built
        return built

    def description(self, agent: str | None = None) -> str:
        """The model-facing description of `run_code`: how to write a program, the modules
        it may import (`sandbox.allowed_modules`), the limits of a run (`limits`), and every
        exposed tool as a typed Python signature with its docstring. It stands alone: the
        model cannot read anything it points to."""
        stubs = self.stubs(agent)
        code_mode = self.session.mode_for(agent) == "code"
        modules = getattr(self.sandbox, "allowed_modules", WasmSandbox.allowed_modules)
        return run_code_description(stubs, modules=modules, limits=self.limits,
                                    code_mode=code_mode, budget=self.description_budget)

    def _index_of(self, stubs: tuple[ToolStub, ...]) -> ToolIndex:
        """What `search_tools` and `describe` see in a run with `stubs` (the exposed tools'):
        a `discovery.ToolIndex`, built once per set of tools."""
        kept = self._indexes.get(id(stubs))
        if kept is not None and kept[0] is stubs:
            return kept[1]
        index = ToolIndex(stubs)
        if len(self._indexes) >= _STUB_CACHE_SIZE:
            self._indexes.pop(next(iter(self._indexes)))
        self._indexes[id(stubs)] = (stubs, index)
        return index

    def flow_of(self, execution: Any) -> RunFlow | None:
        """The labels of the run `execution` is a sub-call of, while it runs; None for a
        direct call (or a sub-call of another `CodeMode`'s run)."""
        return self.flows.of(execution)

    def labels(self, call_id: str) -> dict[str, list[str]]:
        """The labels a finished run of this `CodeMode` held, by its `run_code` call id (a
        resumption's own id, `"<run id>:resume:<k>"`, for a resumed run), also when it
        failed: `{label: [sub-call ids whose results brought it]}`; `{}` when it held none
        or is not known (the latest `REMEMBERED_RUNS` runs of this process are kept)."""
        found = self._finished.get(call_id)
        return {label: list(ids) for label, ids in found.items()} if found else {}

    def full_output(self, call_id: str) -> FullOutput | None:
        """The whole output of a run whose stdout, stderr or value the sandbox cut to
        `limits.output_bytes` (its value's `"cut"` says which), by its `run_code` call id:
        a `FullOutput` (`stdout`, `stderr`: the whole text or None when not cut; `value`:
        the whole value or UNSET). None when nothing was cut or the run is not known (the
        latest `FULL_OUTPUT_RUNS` such runs are kept). A run that failed has it on
        `CodeRunFailed.outcome.full` too."""
        return self._full.get(call_id)

    def type_errors(self, call_id: str) -> list[TypeCheckError]:
        """The errors the type check found in the program of the `run_code` call `call_id`
        (refused under "enforce", run under "warn"); `[]` when it found none, did not
        check, or the run is not known (`TypeChecker.errors_of`)."""
        return self._checker.errors_of(call_id)

    def _remember(self, call_id: str, flow: RunFlow) -> None:
        self._finished[call_id] = flow.by_label()
        while len(self._finished) > REMEMBERED_RUNS:
            self._finished.pop(next(iter(self._finished)))

    def labels_of(self, name: str, agent: str | None = None) -> frozenset[str]:
        """The labels results of the tool `name` carry: its definition's (as `agent` sees
        it) and those of the matching `labels` rules."""
        return self._labeller(agent)(name)

    def _labeller(self, agent: str | None) -> Callable[[str], frozenset[str]]:
        def definition_labels(name: str) -> frozenset[str]:
            definition = self.session.resolve(name, agent)
            return definition.labels if definition is not None else frozenset()
        return labeller(self.label_rules, definition_labels)

    async def plan(self, code: str, *, agent: str | None = None) -> Plan:
        """A dry run of `code`: a `Plan` (`plan.make_plan`; raises `PlanFailed`)."""
        return await make_plan(self, code, agent)

    # ---- the body ------------------------------------------------------------------------

    async def _execute(self, args: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
        code = args["code"]
        agent = ctx.execution.agent
        definitions = self.exposed_tools(agent)
        stubs, specs = self._stubs_and_specs(agent, definitions)
        exposed = {s.name: s for s in stubs}
        run_signal = Signal.any(ctx.signal)
        loop = asyncio.get_running_loop()
        follow_approval(self.session, self.seal_key, ctx.execution)   # before anything runs
        if ctx.resumption is not None:       # before anything of the record is used
            self._check_seal(args, ctx)
            type_errors: tuple[TypeCheckError, ...] = ()     # checked when it first ran
        else:
            type_errors = await self._checker.run_check(self.type_check, code, stubs,
                                                         ctx.execution.call_id)
        replay, run_id = self._replay_of(ctx, code), ctx.execution.call_id
        limits, tape = self.limits, (Tape() if self._records_runs(agent) else None)
        if replay is not None and ctx.resumption is not None:
            run_id, limits, tape = ctx.resumption.run_id, replay.record.limits, replay.record.tape
        # Functions every program has besides its tools, answered on the host.
        index = self._index_of(stubs)
        host_answered: dict[str, HostAnswer] = dict.fromkeys(DISCOVERY_NAMES, index.answer)
        reads: list[dict[str, Any]] = []
        specs = specs + DISCOVERY_SPECS
        if self.output_paging:
            host_answered[READ_OUTPUT] = page_reader(self._full.get, reads)
            specs = (*specs, READ_OUTPUT_SPEC)
        exposed = dry_run(PLANNING.get(), definitions, exposed, host_answered, self,
                          lambda: flow, run_id)
        dispatcher = SubCallDispatcher(self.session, ctx, exposed, loop,
                                       limits.max_concurrent_subcalls, run_signal,
                                       run_id=run_id, replay=replay, seal=self.seal_key,
                                       host_answered=host_answered)
        outer_id = ctx.execution.call_id
        labelled = bool(self.label_rules) or any(d.labels for d in definitions)
        flow = RunFlow(self._labeller(agent) if labelled else no_labels,
                       lambda: dispatcher.exchanges, lambda n: f"{outer_id}:code:{n}")
        close_flow = self.flows.open(ctx.execution.token, flow)
        cancel = threading.Event()
        dispose = run_signal.on_abort(lambda _reason: cancel.set())
        dispatch = dispatcher.dispatch
        request = RunRequest(code=code, tools=specs, limits=limits, tape=tape)
        # `on_output` only when there is one: a sandbox without it still fits `Sandbox`.
        stream = loop_output(self.on_output, outer_id, loop)
        extra: dict[str, Any] = {} if stream is None else {"on_output": stream}
        submit = getattr(self.sandbox, "submit", None)   # no thread kept just to wait
        running = (submit(request, dispatch, cancel, **extra) if submit is not None
                   else run_waiters().submit(self.sandbox.run, request, dispatch,
                                              cancel, **extra))
        try:
            await ended(running, loop)
            outcome = running.result()
            self._full.remember(outer_id, outcome)
        except SandboxUnavailable as exc:    # a missing runtime is a failure, not a crash
            raise CodeRunFailed(f"code run failed (runtime): {exc}") from exc
        except asyncio.CancelledError:
            # The awaiting task was cancelled (Ctrl-C, a cancelled turn): stop the run,
            # which ends within about 0.1 s, so no sandbox thread outlives the call.
            cancel.set()
            await asyncio.wait([asyncio.wrap_future(running)], timeout=2.0)
            raise
        finally:
            dispose()
            await dispatcher.drain()
            close_flow()
            self._remember(ctx.execution.call_id, flow)
        try:
            if not dispatcher.went_live and outcome.status != "paused":
                # The resumed program ended (or diverged) before it reached the calls it paused
                # on: nothing ran, so the run stays paused and may be resumed again.
                self._suspend_again(args, ctx)
                raise ReplayDiverged(
                    "code run failed (replay-diverged): the resumed program did not repeat the "
                    f"paused run ({_why_diverged(dispatcher, outcome)}); no tool ran, and the run "
                    "is still paused: resume it again once the program's tools are the same")
            if dispatcher.diverged is not None or _diverged(outcome):
                raise ReplayDiverged(
                    "code run failed (replay-diverged): the resumed program did not repeat the "
                    f"paused run ({_why_diverged(dispatcher, outcome)}) after the approved calls "
                    "ran")
            if outcome.status == "paused":
                return _labelled(self._suspend(args, ctx, run_id, dispatcher, outcome, request),
                                 flow)
            value = self._value(outcome, dispatcher, flow, code, type_errors)
            if self.output_paging and "cut" in value:
                value["output_handle"] = outer_id
            if reads:
                value["output_reads"] = reads
            return _labelled(value, flow)
        except HarnessError as exc:          # every way a failed run leaves names its labels
            _with_labels(exc, flow)
            raise

    def _replay_of(self, ctx: RunContext, code: str) -> Replay | None:
        """The replay of a resumed run (`resumed.replay_of`), with the answers its record's
        resumptions that crashed settled; a record another resumption used is refused
        (`resumptions`: ResumeTampered)."""
        resumption = ctx.resumption
        if resumption is None:
            return None
        log, run_id = self.session.log.read(), resumption.run_id
        uses = uses_of(log, run_id, record_seal(resumption.state), self.seal_key)
        uses.refuse_if_used(run_id)     # a copy of a used record, appended later
        earlier = earlier_answers(log, run_id, uses.attempts, self.seal_key)
        return replay_of(resumption, code, earlier)

    def _records_runs(self, agent: str | None) -> bool:
        """Whether runs record clocks and randomness for a replay: when they can pause
        (`resumable`; default: when something may ask for approval and nobody can answer,
        so that every `ask` defers)."""
        if self.resumable is not None:
            return self.resumable
        return self.session.may_ask(agent) and not self.session.has_approver(agent)

    def _check_seal(self, args: dict[str, Any], ctx: RunContext) -> None:
        """Check the paused run's record before anything of it is used. A failed check
        uses nothing up: the record is logged again, unchanged, so that the right key (a
        wrong one, a key file refused) can still resume the run; a changed record fails
        again, whatever key.

        Raises:
            ResumeTampered: the paused run's record is not the one `run_code` sealed.
            SealKeyError: the key cannot be used (`SealKey`)."""
        resumption = ctx.resumption
        assert resumption is not None
        try:
            self.seal_key.check(run_id=resumption.run_id, name=RUN_CODE, arguments=dict(args),
                                requests=resumption.requests, state=resumption.state,
                                agent=ctx.execution.agent)
        except (ResumeTampered, SealKeyError):
            self._suspend_again(args, ctx)
            raise

    def _suspend_again(self, args: dict[str, Any], ctx: RunContext) -> None:
        """Log the resumption's suspension again, unchanged, so that it can be resumed."""
        resumption = ctx.resumption
        assert resumption is not None
        agent = ctx.execution.agent
        self.session.log.append(events.ToolSuspended(
            run_id=resumption.run_id, call_id=ctx.execution.call_id, name=RUN_CODE,
            arguments=dict(args), requests=resumption.requests, state=resumption.state,
            agent=agent if agent is not None else UNSET))

    def _suspend(self, args: dict[str, Any], ctx: RunContext, run_id: str,
                 dispatcher: SubCallDispatcher, outcome: RunOutcome,
                 request: RunRequest) -> dict[str, Any]:
        """Log `tool/suspended` with the run's record; the pending value lists the requests."""
        requests = dispatcher.requests()
        record = dispatcher.run_record(request.code, request.limits, outcome.tape)
        agent = ctx.execution.agent
        state = self.seal_key.sealed(run_id=run_id, name=RUN_CODE, arguments=dict(args),
                                     requests=requests, state=msgspec.to_builtins(record),
                                     agent=agent)
        self.session.log.append(events.ToolSuspended(
            run_id=run_id, call_id=ctx.execution.call_id, name=RUN_CODE, arguments=dict(args),
            requests=requests, state=state, agent=agent if agent is not None else UNSET))
        value: dict[str, Any] = {
            "status": "pending", "run_id": run_id,
            "approvals": [msgspec.to_builtins(r) for r in requests],
            "logs": outcome.stdout.splitlines(keepends=True)}
        if outcome.stderr:
            value["stderr"] = outcome.stderr
        value["subcalls"] = dispatcher.summary.to_json()
        return value

    def _value(self, outcome: RunOutcome, dispatcher: SubCallDispatcher, flow: RunFlow,
               code: str, type_errors: Sequence[TypeCheckError]) -> dict[str, Any]:
        if outcome.status != "ok":
            message = _failure_message(outcome)
            if type_errors:                  # "warn": they may say why it failed
                message += "\n\n" + warned(code, type_errors)
            raise CodeRunFailed(message, outcome=outcome)
        value: dict[str, Any] = {"logs": outcome.stdout.splitlines(keepends=True)}
        if outcome.value is not UNSET:
            value["result"] = outcome.value
        if outcome.stderr:
            value["stderr"] = outcome.stderr
        if outcome.cut:
            value["cut"] = cut_json(outcome)
        value["subcalls"] = dispatcher.summary.to_json()
        if type_errors:
            value["type_errors"] = [msgspec.to_builtins(e) for e in type_errors]
        return value


def _with_labels(exc: HarnessError, flow: RunFlow) -> None:
    """Give `exc`, a failure of a run that held labels, those labels: its message ends
    with the labels line (what the model, the log, the CLI and an adapter's exception read;
    what the run printed, or a divergence's words, may hold labelled data) and
    `exc.labels` is `{label: [sub-call ids]}` (as `CodeMode.labels(call_id)` says later)."""
    labels = flow.by_label()
    if labels and not getattr(exc, "labels", None):
        exc.message += "\n\n" + _labels_line(labels)
        exc.args = (exc.message,)
        exc.labels = labels                  # type: ignore[attr-defined]


def _labelled(value: dict[str, Any], flow: RunFlow) -> dict[str, Any]:
    """`value` with the run's labels, `"labels": {label: [sub-call ids]}`, when it holds any."""
    labels = flow.by_label()
    if labels:
        value["labels"] = labels
    return value


def _why_diverged(dispatcher: SubCallDispatcher, outcome: RunOutcome) -> str:
    """What the resumed program did differently, in a few words."""
    if dispatcher.diverged is not None:
        return dispatcher.diverged
    error = outcome.error
    if error is None:
        return "it ended before it reached the calls it paused on"
    return f"{getattr(error, 'type', error.kind)}: {error.message}"


def _diverged(outcome: RunOutcome) -> bool:
    return outcome.error is not None and outcome.error.kind == "replay-diverged"
