"""Mutation-family matrix (docs/pipeline-spec.md §14.3) against the real pipeline.

Mutating families: the filesystem `write` and `edit` tools and a hand-written `set_quota`
(an enum field and two fields that conflict). A pre-approval validator on
`tools/pre-execute` checks every mutating call against the tool's schema (root closed) plus
the family's cross-field rule and denies with one fixed, detail-free message before the
approval listener can ask. Each cell carries a secret sentinel: it may appear only in the
durable argument records (`tool/call.arguments`, or `tool/code-dispatch-start.arguments`
and `tool/code-dispatch.arguments` for Code-Mode sub-calls).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any, Literal

import msgspec
import pytest

from codemode.pipeline import (
    Ask,
    Deny,
    Execution,
    ExecutionToken,
    InvalidArgumentsError,
    LogClosedError,
    RunContext,
    Session,
    Signal,
    ToolDefinition,
    events,
    retry_wrapper,
    thaw,
    timeout_wrapper,
    tool,
    validate,
)
from codemode.pipeline.events import encode_event
from codemode.pipeline.fs import FsEditError, filesystem_tools

SENTINEL = f"SENTINEL-{uuid.uuid4().hex}"
REJECTED = "call rejected by the mutation policy before approval"
ORIGINAL = "hello world\n"
AGENT = "main"
MUTATING = frozenset({"write", "edit", "set_quota"})


def text(message: str) -> tuple[dict[str, str], ...]:
    return ({"type": "text", "text": f"Error: {message}"},)


# ---- the hand-written mutating tool -----------------------------------------------------

def quota_conflict(args: dict[str, Any]) -> str | None:
    """The cross-field rule of `set_quota`."""
    if args.get("mode") == "hard" and args.get("hard_limit") is None:
        return 'mode "hard" requires "hard_limit"'
    soft, hard = args.get("soft_limit"), args.get("hard_limit")
    if soft is not None and hard is not None and soft > hard:
        return '"soft_limit" must not exceed "hard_limit"'
    return None


def edit_conflict(args: dict[str, Any]) -> str | None:
    """The cross-field rule of `edit`."""
    if args.get("old_string") == args.get("new_string"):
        return '"old_string" and "new_string" must differ'
    return None


CROSS_FIELD = {"set_quota": quota_conflict, "edit": edit_conflict}


class QuotaStore:
    """The backend `set_quota` mutates. `release`, when set, holds the body (uncooperative:
    it ignores the signal) until the test lets it finish."""

    def __init__(self) -> None:
        self.applied: list[dict[str, Any]] = []
        self.release: asyncio.Event | None = None
        self.entered = asyncio.Event()


def quota_tool(store: QuotaStore) -> ToolDefinition:
    @tool(name="set_quota", strict=True)
    async def set_quota(
        ctx: RunContext,
        user: str,
        mode: Literal["soft", "hard"],
        soft_limit: int | None = None,
        hard_limit: int | None = None,
    ) -> dict[str, Any]:
        """Set a user's disk quota.

        Args:
            user: the account.
            mode: "soft" warns, "hard" refuses writes (needs `hard_limit`).
            soft_limit: warning threshold in MB.
            hard_limit: refusal threshold in MB.
        """
        args = {"mode": mode, "soft_limit": soft_limit, "hard_limit": hard_limit}
        problem = quota_conflict(args)                      # defensive re-validation
        if problem is not None:
            raise InvalidArgumentsError(f"invalid arguments: {problem}")
        store.entered.set()
        if store.release is not None:
            await store.release.wait()
        store.applied.append({"user": user, **args})
        return {"applied": mode}                             # never echoes the user

    return set_quota


# ---- the pre-approval validator and the asker --------------------------------------------

def schema_problems(execution: Any) -> list[str]:
    """Violations of the tool's schema with the root closed, plus the cross-field rule."""
    definition = execution.definition
    if definition is None:
        return ["unknown tool"]
    args = thaw(execution.arguments)
    closed = {**definition.parameters, "additionalProperties": False}
    problems = validate(closed, args, label="arguments")
    rule = CROSS_FIELD.get(execution.name)
    if not problems and rule is not None:
        conflict = rule(args)
        if conflict is not None:
            problems.append(conflict)
    return problems


class World:
    """A session with the mutating families, the policy, an answerer and recorders."""

    def __init__(self, root: Path, *, approval: Any = "ask", answers: list[str] | None = None,
                 answerer: bool = True, extra_tools: tuple[ToolDefinition, ...] = ()) -> None:
        self.root = root
        root.mkdir(exist_ok=True)
        (root / "a.txt").write_text(ORIGINAL)
        self.session = Session(approval=approval)
        self.store = QuotaStore()
        fs = {d.name: d for d in filesystem_tools(root, session=self.session)}
        self.definitions = {"write": fs["write"], "edit": fs["edit"], "read": fs["read"],
                            "set_quota": quota_tool(self.store)}
        for definition in (*self.definitions.values(), *extra_tools):
            self.session.register(definition)
        self.answers = list(answers or [])
        self.requests: list[Any] = []
        self.pre_execute: list[str] = []
        self.validator_denied: list[str] = []
        self.dispatched: list[str] = []
        self.published: list[Any] = []
        self.session.on("tools/pre-execute", self.validator)
        self.session.on("tools/pre-execute", self.asker)
        self.session.on("tools/execute", self.count_dispatch)
        self.session.on("tools/result", lambda execution, result: self.published.append(result))
        if answerer:
            self.session.on("approval/answer", self.answer)

    def validator(self, execution: Any, next: Any) -> Any:
        self.pre_execute.append(execution.name)
        if execution.name in MUTATING and schema_problems(execution):
            self.validator_denied.append(execution.name)
            return Deny(REJECTED)                     # fixed and detail-free
        return next()

    def asker(self, execution: Any, next: Any) -> Any:
        return Ask() if execution.name in MUTATING else next()

    async def count_dispatch(self, execution: Any, next: Any) -> Any:
        self.dispatched.append(execution.name)
        return await next()

    def answer(self, request: Any, next: Any) -> str:
        self.requests.append(request)
        return self.answers.pop(0) if self.answers else "allowed-once"

    async def call(self, name: str, args: Any, **kw: Any) -> Any:
        return await self.session.call(name, args, agent=kw.pop("agent", AGENT), **kw)

    async def read_a(self) -> None:
        result = await self.call("read", {"path": "a.txt"})
        assert result.is_error is False

    def events(self, kind: type) -> list[Any]:
        return [e for e in self.session.log.read() if isinstance(e, kind)]

    def approval_events(self) -> list[Any]:
        return self.events(events.ApprovalAsked) + self.events(events.ApprovalDecided)

    def unchanged(self) -> bool:
        names = sorted(p.name for p in self.root.iterdir())
        return (names == ["a.txt"] and (self.root / "a.txt").read_text() == ORIGINAL
                and self.store.applied == [])

    def sentinel_hits(self, sentinel: str = SENTINEL) -> list[tuple[str, bool]]:
        """(event type, sentinel also outside `arguments`) for every event holding it."""
        hits = []
        for event in self.session.log.read():
            raw = encode_event(event)
            if sentinel.encode() not in raw:
                continue
            doc = msgspec.json.decode(raw)
            doc.pop("arguments", None)
            hits.append((doc["type"], sentinel in json.dumps(doc)))
        return hits

    def assert_sentinel_only_in(self, *kinds: str, sentinel: str = SENTINEL) -> None:
        hits = self.sentinel_hits(sentinel)
        assert hits and {kind for kind, _ in hits} <= set(kinds), hits
        assert [outside for _, outside in hits] == [False] * len(hits)
        assert sentinel not in repr(self.published)
        assert sentinel not in repr(self.requests)
        assert sentinel not in repr(self.session.inbox)


@pytest.fixture
def world(tmp_path: Path) -> World:
    w = World(tmp_path / "ws")
    yield w
    w.session.close()


# ---- the matrix ----------------------------------------------------------------------------

S = "@S@"  # placeholder for the sentinel in cell arguments
CASES = ("unknown_key", "wrong_type", "invalid_enum", "cross_field")
MATRIX: dict[str, dict[str, dict[str, Any]]] = {
    "write": {
        "unknown_key": {"path": "new.txt", "content": S, "mode": "0644"},
        "wrong_type": {"path": 7, "content": S},
    },
    "edit": {
        "unknown_key": {"path": "a.txt", "old_string": "hello", "new_string": S, "backup": True},
        "wrong_type": {
            "path": "a.txt",
            "old_string": "hello",
            "new_string": S,
            "replace_all": "yes",
        },
        "cross_field": {"path": "a.txt", "old_string": S, "new_string": S},
    },
    "set_quota": {
        "unknown_key": {"user": S, "mode": "soft", "soft_limit": 1, "burst": 5},
        "wrong_type": {"user": S, "mode": "soft", "soft_limit": "10"},
        "invalid_enum": {"user": S, "mode": "unlimited"},
        "cross_field": {"user": S, "mode": "hard", "soft_limit": 10},
    },
}
CELLS = [(family, case) for family, cells in MATRIX.items() for case in cells]
VALID = {
    "write": {"path": "new.txt", "content": S},
    "edit": {"path": "a.txt", "old_string": "hello", "new_string": S},
    "set_quota": {"user": S, "mode": "hard", "hard_limit": 50},
}


def fill(value: Any, sentinel: str = SENTINEL) -> Any:
    if value == S:
        return sentinel
    if isinstance(value, dict):
        return {k: fill(v, sentinel) for k, v in value.items()}
    return value


def _has_enum(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "enum" in schema or any(_has_enum(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_enum(v) for v in schema)
    return False


def test_matrix_cells_left_out_do_not_apply_to_that_family(tmp_path):
    w = World(tmp_path / "ws")
    for family, cells in MATRIX.items():
        schema = w.definitions[family].parameters
        assert ("invalid_enum" in cells) == _has_enum(schema), family
        assert ("cross_field" in cells) == (family in CROSS_FIELD), family
        assert {"unknown_key", "wrong_type"} <= set(cells)
        assert set(cells) <= set(CASES)
    w.session.close()


def own_schema_rejects(w: World, family: str, args: Any) -> str | None:
    """The registry's own answer to a cell: the tool's schema rejects it before any policy
    (``INVALID_ARGS``), or ``None``: only the pre-approval validator's closed root or
    cross-field rule does."""
    problems = validate(w.definitions[family].parameters, args, label="arguments")
    return "invalid arguments: " + "; ".join(problems) if problems else None


@pytest.mark.parametrize(("family", "case"), CELLS, ids=[f"{f}-{c}" for f, c in CELLS])
async def test_invalid_mutation_is_refused_before_approval_and_the_sentinel_stays_in_tool_call(
    world, family, case
):
    if family == "edit":
        await world.read_a()                        # the gate would let the edit through
    args = fill(MATRIX[family][case])
    own = own_schema_rejects(world, family, args)
    result = await world.call(family, args)
    if own is not None:      # the tool's own schema: refused at S3, policy never consulted
        assert (result.is_error, result.denied) == (True, False)
        assert (result.error.code, result.error.message) == ("INVALID_ARGS", own)
        assert result.content == text(own) and SENTINEL not in own
        assert world.validator_denied == [] and family not in world.pre_execute
    else:
        assert (result.is_error, result.denied) == (True, True)
        assert result.content == text(REJECTED)
        assert (result.error.message, result.error.info) == (REJECTED, None)
        assert world.validator_denied == [family]
    assert world.requests == [] and world.approval_events() == []
    assert family not in world.dispatched and world.unchanged()
    [logged] = world.events(events.ToolResult)[-1:]
    assert (logged.is_error, logged.content) == (True, result.content)
    world.assert_sentinel_only_in("tool/call")
    [call] = [e for e in world.events(events.ToolCall) if e.name == family]
    assert json.loads(call.arguments) == args


def test_the_matrix_has_cells_for_both_the_registry_and_the_validator(tmp_path):
    w = World(tmp_path / "ws")
    own = {(f, c) for f, c in CELLS if own_schema_rejects(w, f, fill(MATRIX[f][c]))}
    assert own and own != set(CELLS)
    assert ("set_quota", "invalid_enum") in own and ("write", "unknown_key") not in own
    w.session.close()


# ---- Code Mode column ------------------------------------------------------------------------

PROGRAM = """
import json
S = "SENTINEL-" + {tail!r}
def fill(v):
    if v == "@S@":
        return S
    if isinstance(v, dict):
        return {{k: fill(x) for k, x in v.items()}}
    return v
out = []
for name, kw in json.loads({cells!r}):
    try:
        call_tool(name, **fill(kw))
        out.append(["ok"])
    except ToolCallError as e:
        out.append([e.code, e.message])
    except TypeError as e:
        out.append(["TypeError", str(e)])
out
"""


def program(cells: list[tuple[str, dict[str, Any]]], sentinel: str = SENTINEL) -> str:
    """A program that builds the sentinel at run time: the full value is not in its text."""
    prefix, tail = sentinel.split("-", 1)
    assert prefix == "SENTINEL"
    code = PROGRAM.format(tail=tail, cells=json.dumps(cells))
    assert sentinel not in code
    return code


def code_world(tmp_path: Path, **kw: Any) -> World:
    from codemode import CodeMode

    w = World(tmp_path / "ws", **kw)
    w.session.set_mode("both")          # the cells call tools directly and in programs
    w.code = CodeMode(w.session)
    return w


# Every cell: an unknown key is a call of the wrong shape for the Python signature (the guest's
# TypeError), sent to the host marked `invalid`, logged and refused there before policy.
CODE_CELLS = {family: [(family, cells[case]) for case in cells] for family, cells in MATRIX.items()}


@pytest.mark.parametrize("family", list(MATRIX))
async def test_invalid_sub_calls_are_denied_before_approval_and_sentinel_stays_in_dispatch_records(
    tmp_path, family
):
    w = code_world(tmp_path)
    if family == "edit":
        await w.read_a()
    cells = CODE_CELLS[family]
    result = await w.call("run_code", {"code": program(cells)})
    assert result.is_error is False, result.content
    expected_outcomes, expected_content = [], []
    for _, kw in cells:
        own = own_schema_rejects(w, family, fill(kw))
        declared = w.definitions[family].parameters.get("properties", {})
        shape = sorted(set(kw) - set(declared))
        if shape:   # a keyword the signature does not have: the guest's own TypeError
            message = (f"invalid arguments: {family}() got an unexpected keyword argument "
                       f"'{shape[0]}'")
            expected_outcomes.append(["INVALID_ARGS", message])
            expected_content.append((True, text(message)))
        elif own is not None:
            expected_outcomes.append(["INVALID_ARGS", own])
            expected_content.append((True, text(own)))
        else:
            expected_outcomes.append(["DENIED", REJECTED])
            expected_content.append((True, text(REJECTED)))
    assert result.value["result"] == expected_outcomes
    assert w.validator_denied == [family] * expected_outcomes.count(["DENIED", REJECTED])
    assert w.requests == [] and w.approval_events() == []
    assert family not in w.dispatched and w.unchanged()
    starts, settles = w.events(events.CodeDispatchStart), w.events(events.CodeDispatch)
    expected = [fill(kw) for _, kw in cells]
    assert [s.arguments for s in starts] == expected
    assert [s.arguments for s in settles] == expected
    assert [(s.is_error, s.content) for s in settles] == expected_content
    w.assert_sentinel_only_in("tool/code-dispatch-start", "tool/code-dispatch")
    assert len(w.sentinel_hits()) == 2 * len(cells)
    w.session.close()


async def test_allowed_sub_call_is_asked_by_sub_call_id_and_logs_sentinel_only_in_dispatch_records(
    tmp_path,
):
    w = code_world(tmp_path)
    result = await w.call("run_code", {"code": program([("set_quota", VALID["set_quota"])])},
                          call_id="outer")
    assert result.value["result"] == [["ok"]]
    assert w.store.applied == [
        {"user": SENTINEL, "mode": "hard", "soft_limit": None, "hard_limit": 50}
    ]
    [request] = w.requests
    assert (request.tool_name, request.call_id, request.reason) == (
        "set_quota",
        "outer:code:1",
        None,
    )
    [asked] = w.events(events.ApprovalAsked)
    [decided] = w.events(events.ApprovalDecided)
    assert (asked.call_id, decided.id, decided.outcome) == (
        "outer:code:1",
        asked.id,
        "allowed-once",
    )
    [start], [settle] = w.events(events.CodeDispatchStart), w.events(events.CodeDispatch)
    assert start.arguments == settle.arguments == fill(VALID["set_quota"])
    w.assert_sentinel_only_in("tool/code-dispatch-start", "tool/code-dispatch")
    w.session.close()


async def test_unknown_key_to_a_closed_schema_tool_from_a_program_is_logged_not_judged(tmp_path):
    # A keyword that a closed-schema tool cannot take is a call-shape error the guest finds
    # (Python's own TypeError text); the attempt still reaches the host, numbered and logged,
    # and fails INVALID_ARGS there before any policy or approval.
    w = code_world(tmp_path)
    cells = [("set_quota", MATRIX["set_quota"]["unknown_key"])]
    result = await w.call("run_code", {"code": program(cells)})
    assert result.value["result"] == [[
        "INVALID_ARGS",
        "invalid arguments: set_quota() got an unexpected keyword argument 'burst'"]]
    assert w.store.applied == [] and w.requests == [] and w.validator_denied == []
    [start], [settle] = w.events(events.CodeDispatchStart), w.events(events.CodeDispatch)
    assert start.arguments == settle.arguments == fill(MATRIX["set_quota"]["unknown_key"])
    w.session.close()


# ---- the body re-validates defensively ----------------------------------------------------

def body_context(world: World, name: str, args: Any) -> RunContext:
    execution = Execution(call_id="direct", root_call_id="direct", name=name, arguments=args,
                          agent=AGENT, parent=None, token=ExecutionToken(), signal=Signal(),
                          definition=world.definitions[name])
    return RunContext(execution, Signal(), lambda message: None, lambda: None)


BODY_REJECTS = [
    (
        "write",
        "wrong_type",
        InvalidArgumentsError,
        "INVALID_ARGS",
        'invalid arguments: "path" must be a string',
    ),
    (
        "edit",
        "wrong_type",
        InvalidArgumentsError,
        "INVALID_ARGS",
        'invalid arguments: "replace_all" must be a boolean',
    ),
    (
        "edit",
        "cross_field",
        FsEditError,
        "FS_EDIT_FAILED",
        "old_string and new_string are identical; nothing to change",
    ),
    (
        "set_quota",
        "unknown_key",
        InvalidArgumentsError,
        "INVALID_ARGS",
        'invalid arguments: "burst" is not a declared property (additionalProperties: false)',
    ),
    (
        "set_quota",
        "wrong_type",
        InvalidArgumentsError,
        "INVALID_ARGS",
        'invalid arguments: "soft_limit" must be an integer or null',
    ),
    (
        "set_quota",
        "invalid_enum",
        InvalidArgumentsError,
        "INVALID_ARGS",
        'invalid arguments: "mode" must be one of ["hard","soft"]',
    ),
    (
        "set_quota",
        "cross_field",
        InvalidArgumentsError,
        "INVALID_ARGS",
        'invalid arguments: mode "hard" requires "hard_limit"',
    ),
]


@pytest.mark.parametrize(("family", "case", "error", "code", "message"), BODY_REJECTS,
                         ids=[f"{f}-{c}" for f, c, *_ in BODY_REJECTS])
async def test_body_called_directly_revalidates_and_mutates_nothing(
    world, family, case, error, code, message
):
    if family == "edit":
        await world.read_a()
    args = fill(MATRIX[family][case])
    definition = world.definitions[family]
    with pytest.raises(error) as raised:
        await definition.execute(args, body_context(world, family, args))
    assert (raised.value.code, raised.value.message) == (code, message)
    assert SENTINEL not in message
    assert world.unchanged()


async def test_a_schema_invalid_call_fails_invalid_args_without_asking():
    store = QuotaStore()
    plain = Session(tools=[quota_tool(store)], approval="ask")
    asked: list[Any] = []
    plain.on("tools/pre-execute", lambda e, n: Ask())
    plain.on("approval/answer", lambda request, next: asked.append(request) or "allowed-once")
    result = await plain.call("set_quota", fill(MATRIX["set_quota"]["invalid_enum"]), agent=AGENT)
    assert (result.error.message, result.error.code) == (
        'invalid arguments: "mode" must be one of ["hard","soft"]', "INVALID_ARGS")
    assert asked == [] and store.applied == []      # the registry's check, before policy
    plain.close()


async def test_fs_bodies_accept_unknown_keys_so_only_the_validator_rejects_them(world):
    args = fill(MATRIX["write"]["unknown_key"])
    value = await world.definitions["write"].execute(args, body_context(world, "write", args))
    assert value == {"path": "new.txt", "bytes": len(SENTINEL), "created": True}
    assert (world.root / "new.txt").read_text() == SENTINEL


# ---- approval outcomes ------------------------------------------------------------------------

def mutated(world: World, family: str) -> int:
    if family == "set_quota":
        return len(world.store.applied)
    if family == "write":
        return int((world.root / "new.txt").exists())
    return (world.root / "a.txt").read_text().count(SENTINEL)


@pytest.mark.parametrize("family", list(VALID))
async def test_allowed_once_mutates_once_and_an_identical_second_call_asks_again(tmp_path, family):
    w = World(tmp_path / "ws", answers=["allowed-once", "rejected"])
    if family == "edit":
        await w.read_a()
    args = fill(VALID[family])
    first = await w.call(family, args)
    assert first.is_error is False and mutated(w, family) == 1
    second = await w.call(family, args)
    assert second.content == text(f'the user rejected tool "{family}"')
    assert second.error.info is None and mutated(w, family) == 1
    assert w.dispatched.count(family) == 1
    assert [(r.tool_name, r.agent) for r in w.requests] == [(family, AGENT)] * 2
    asked, decided = w.events(events.ApprovalAsked), w.events(events.ApprovalDecided)
    assert len({a.call_id for a in asked}) == 2
    assert [(d.id, d.outcome) for d in decided] == [
        (asked[0].id, "allowed-once"),
        (asked[1].id, "rejected"),
    ]
    w.assert_sentinel_only_in("tool/call")
    w.session.close()


REFUSALS = [
    ("deny", dict(answers=["rejected"]), 'the user rejected tool "{}"', "rejected"),
    ("cancel", dict(answers=["cancelled"]), 'approval for tool "{}" was cancelled', "cancelled"),
    (
        "unavailable",
        dict(answerer=False),
        'tool "{}" requires approval, but no approval channel is available',
        "unavailable",
    ),
    ("no-channel", dict(approval=None), 'tool "{}" requires approval (not yet supported)', None),
]


@pytest.mark.parametrize("family", list(VALID))
@pytest.mark.parametrize(
    ("kind", "options", "message", "outcome"), REFUSALS, ids=[r[0] for r in REFUSALS]
)
async def test_non_grant_refuses_without_mutating(
    tmp_path, family, kind, options, message, outcome
):
    w = World(tmp_path / "ws", **options)
    if family == "edit":
        await w.read_a()
    result = await w.call(family, fill(VALID[family]))
    expected = message.format(family)
    assert (result.content, result.error.message, result.error.info) == (
        text(expected),
        expected,
        None,
    )
    assert result.denied and family not in w.dispatched and w.unchanged()
    decided = [d.outcome for d in w.events(events.ApprovalDecided)]
    assert decided == ([] if outcome is None else [outcome])
    assert len(w.events(events.ApprovalAsked)) == len(decided)
    w.assert_sentinel_only_in("tool/call")
    w.session.close()


async def test_caller_abort_while_approval_is_pending_is_aborted_before_dispatch_without_writing(
    tmp_path,
):
    w = World(tmp_path / "ws", answerer=False)
    waiting = asyncio.Event()

    async def slow(request, next):
        waiting.set()
        await asyncio.sleep(30)
        return "allowed-once"

    w.session.on("approval/answer", slow)
    signal = Signal()
    task = asyncio.ensure_future(w.call("write", fill(VALID["write"]), signal=signal))
    await asyncio.wait_for(waiting.wait(), 5)
    signal.abort()
    result = await asyncio.wait_for(task, 5)
    assert (result.error.code, result.error.message) == (
        "ABORTED_BEFORE_DISPATCH",
        "tool call aborted before dispatch",
    )
    assert [d.outcome for d in w.events(events.ApprovalDecided)] == ["cancelled"]
    assert "write" not in w.dispatched and w.unchanged()
    w.assert_sentinel_only_in("tool/call")
    w.session.close()


# ---- cancellation ---------------------------------------------------------------------------

@pytest.mark.parametrize("family", list(VALID))
async def test_pre_aborted_mutation_is_aborted_before_dispatch_and_nothing_is_written(
    world, family
):
    if family == "edit":
        await world.read_a()
    world.pre_execute.clear()
    result = await world.call(family, fill(VALID[family]), signal=Signal.aborted_with())
    assert result.content == text("tool call aborted before dispatch")
    assert (result.error.code, result.error.info.name) == ("ABORTED_BEFORE_DISPATCH", "AbortError")
    assert world.pre_execute == [] and world.requests == [] and world.approval_events() == []
    assert world.dispatched.count(family) == 0 and world.unchanged()
    [logged] = world.events(events.ToolResult)[-1:]
    assert (logged.error.code, logged.error.name) == ("ABORTED_BEFORE_DISPATCH", "AbortError")
    world.assert_sentinel_only_in("tool/call")


def slow_read_tool(started: asyncio.Event, finished: list[float]) -> ToolDefinition:
    @tool(name="slow_read", concurrency_safe=True)
    async def slow_read(ctx: RunContext, path: str) -> str:
        """Read a large remote object slowly; stops when the call is aborted."""
        started.set()
        waiter = asyncio.ensure_future(ctx.signal.wait())
        try:
            await asyncio.wait({waiter}, timeout=10)
        finally:
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
        finished.append(time.monotonic())
        return "partial"

    return slow_read


async def test_abort_mid_read_stops_the_body_and_the_result_is_aborted(tmp_path):
    started, finished = asyncio.Event(), []
    w = World(tmp_path / "ws", extra_tools=(slow_read_tool(started, finished),))
    signal = Signal()
    task = asyncio.ensure_future(w.call("slow_read", {"path": "big.bin"}, signal=signal))
    await asyncio.wait_for(started.wait(), 5)
    t0 = time.monotonic()
    signal.abort()
    result = await asyncio.wait_for(task, 5)
    assert result.content == text("tool call aborted")
    assert (result.error.code, result.error.info.name) == ("ABORTED", "AbortError")
    assert finished and finished[0] - t0 < 5.0     # not its 10 s wait
    assert w.requests == [] and w.approval_events() == []     # a read is never asked
    w.session.close()


async def test_cancelling_the_awaiting_task_aborts_a_read_and_still_logs_its_result(tmp_path):
    started, finished = asyncio.Event(), []
    w = World(tmp_path / "ws", extra_tools=(slow_read_tool(started, finished),))
    task = asyncio.ensure_future(w.call("slow_read", {"path": "big.bin"}))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    [logged] = w.events(events.ToolResult)
    assert (logged.is_error, logged.content, logged.error.code) == (
        True,
        text("tool call aborted"),
        "ABORTED",
    )
    assert finished
    w.session.close()


def backend_tool(attempts: list[float], first_done: asyncio.Event) -> ToolDefinition:
    @tool(name="push_quota")
    async def push_quota(user: str) -> str:
        """Push a quota to the remote backend (fails while the backend is down)."""
        attempts.append(time.monotonic())
        first_done.set()
        raise RuntimeError("backend unavailable")

    return push_quota


async def test_retry_runs_every_attempt_when_nobody_aborts(tmp_path):
    attempts, first = [], asyncio.Event()
    w = World(tmp_path / "ws", extra_tools=(backend_tool(attempts, first),))
    w.session.on("tools/execute", retry_wrapper(max_attempts=4, backoff_ms=5))
    result = await w.call("push_quota", {"user": "ada"})
    assert (result.error.message, result.error.info) == ("backend unavailable", None)
    assert len(attempts) == 4
    w.session.close()


@pytest.mark.slow
async def test_caller_abort_stops_further_backend_attempts(tmp_path):
    attempts, first = [], asyncio.Event()
    w = World(tmp_path / "ws", extra_tools=(backend_tool(attempts, first),))
    w.session.on("tools/execute", retry_wrapper(max_attempts=5, backoff_ms=1000))
    signal = Signal()
    task = asyncio.ensure_future(w.call("push_quota", {"user": "ada"}, signal=signal))
    await asyncio.wait_for(first.wait(), 5)
    signal.abort()                                  # during the first backoff
    t0 = time.monotonic()
    result = await asyncio.wait_for(task, 5)
    assert time.monotonic() - t0 < 0.5              # the 1 s backoff was interrupted
    await asyncio.sleep(1.2)                        # nothing detached keeps retrying
    assert len(attempts) == 1
    # Cancellation only replaces a success: the tool's own failure is kept (§6).
    assert (result.error.message, result.error.info) == ("backend unavailable", None)
    w.session.close()


async def test_late_quota_success_after_caller_abort_is_aborted_although_the_quota_was_applied(
    world,
):
    world.store.release = asyncio.Event()
    signal = Signal()
    task = asyncio.ensure_future(world.call("set_quota", fill(VALID["set_quota"]), signal=signal))
    await asyncio.wait_for(world.store.entered.wait(), 5)
    signal.abort()
    await asyncio.sleep(0.05)
    assert not task.done()                          # a started body is never abandoned
    world.store.release.set()
    result = await asyncio.wait_for(task, 5)
    assert world.store.applied == [
        {"user": SENTINEL, "mode": "hard", "soft_limit": None, "hard_limit": 50}
    ]
    assert result.content == text("tool call aborted")
    assert (result.error.code, result.error.info.name) == ("ABORTED", "AbortError")
    [logged] = world.events(events.ToolResult)
    assert logged.error.code == "ABORTED"
    world.assert_sentinel_only_in("tool/call")


async def test_late_write_success_after_caller_abort_is_aborted_although_the_file_was_written(
    world,
):
    written, release = asyncio.Event(), asyncio.Event()

    async def hold(execution, next):
        result = await next()                       # the write happens here
        written.set()
        await release.wait()
        return result

    world.session.on("tools/execute", hold)
    signal = Signal()
    task = asyncio.ensure_future(world.call("write", fill(VALID["write"]), signal=signal))
    await asyncio.wait_for(written.wait(), 5)
    signal.abort()
    release.set()
    result = await asyncio.wait_for(task, 5)
    assert (world.root / "new.txt").read_text() == SENTINEL
    assert result.content == text("tool call aborted")
    assert result.error.code == "ABORTED" and result.value is msgspec.UNSET
    world.assert_sentinel_only_in("tool/call")


# ---- disposal -------------------------------------------------------------------------------

def live_timers(loop: asyncio.AbstractEventLoop) -> list[Any]:
    return [h for h in getattr(loop, "_scheduled", ()) if not h.cancelled()]


async def test_aclose_drains_all_pipeline_work_and_leaves_no_tasks_or_timers(tmp_path):
    loop = asyncio.get_running_loop()
    baseline_tasks = asyncio.all_tasks()
    baseline_timers = set(map(id, live_timers(loop)))
    started, finished, attempts, first = asyncio.Event(), [], [], asyncio.Event()

    @tool(name="timed", timeout_ms=5000)
    async def timed() -> str:
        """Finishes well inside its budget."""
        return "in time"

    w = code_world(tmp_path, extra_tools=(slow_read_tool(started, finished),
                                          backend_tool(attempts, first), timed))
    w.session.on("tools/execute", timeout_wrapper)
    w.session.on("tools/execute", retry_wrapper(max_attempts=3, backoff_ms=20))
    observed: list[str] = []

    async def slow_observer(execution, result):
        await asyncio.sleep(0.1)
        observed.append(execution.name)

    w.session.on("tools/result", slow_observer)
    async with w.session.turn():
        assert (await w.call("write", fill(VALID["write"]))).is_error is False
        assert (await w.call("timed", {})).value == "in time"
        await w.call("push_quota", {"user": "ada"})
        signal = Signal()
        read = asyncio.ensure_future(w.call("slow_read", {"path": "x"}, signal=signal))
        await started.wait()
        signal.abort()
        await read
        run = await w.call("run_code", {"code": program([("set_quota", VALID["set_quota"])])})
        assert run.value["result"] == [["ok"]]
    assert len(observed) < 6                        # observer work is still pending here
    await w.session.aclose()
    assert sorted(observed) == sorted(
        ["write", "timed", "push_quota", "slow_read", "set_quota", "run_code"]
    )
    leftover = asyncio.all_tasks() - baseline_tasks - {asyncio.current_task()}
    assert leftover == set()
    assert [h for h in live_timers(loop) if id(h) not in baseline_timers] == []
    assert len(attempts) == 3
    with pytest.raises(LogClosedError):
        w.session.log.append(events.TurnStart(turn=99))
