"""Tool calls in async code, however the program stores them, on both tiers.

The matrix crosses every way a call's result can reach asyncio (a route) with every asyncio
entry point, and checks the values and that the calls overlapped. Overlap is read from the
host, not the clock: `StepHost` settles one awaited call per batch that waits, so calls made
one after another before anything waits are all in flight at once (`max_in_flight` == their
number) while calls that run one by one never are (1).
"""

import pytest

from codemode.sandbox import (
    RestrictedProcessSandbox,
    RestrictedSandbox,
    RunRequest,
    SandboxLimits,
    SubcallLimitExceeded,
    WasmSandbox,
)

from .conftest import STEP_TOOLS, StepHost


@pytest.fixture(scope="module", params=["wasm", "restricted", "restricted-process"])
def tier(request):
    if request.param == "wasm":
        return WasmSandbox()
    return RestrictedSandbox() if request.param == "restricted" else RestrictedProcessSandbox()


@pytest.fixture
def host():
    return StepHost()


def run(tier, host, code, **limits):
    request = RunRequest(code=code, tools=STEP_TOOLS,
                         limits=SandboxLimits(**{"wall_clock_s": 5.0, **limits}))
    return tier.run(request, host)


# ---- the matrix: route x entry point --------------------------------------------------------

# Each route leaves `aws`, an iterable of three things that stand for echo(value=0..2):
# pending calls (however stored), plain values, or a mix. `(code, calls made)`.
ROUTES = {
    "list_literal": ("aws = [echo(value=0), echo(value=1), echo(value=2)]", 3),
    "list_comprehension": ("aws = [echo(value=i) for i in range(3)]", 3),
    "generator": ("aws = (echo(value=i) for i in range(3))", 3),
    "dict_comprehension": ("d = {i: echo(value=i) for i in range(3)}\naws = d.values()", 3),
    "set_comprehension": ("aws = {echo(value=i) for i in range(3)}", 3),
    "map_lambda": ("aws = map(lambda i: echo(value=i), range(3))", 3),
    "map_binding": ("aws = map(echo, range(3))", 3),
    "helper_return": ("def fetch(i):\n    return echo(value=i)\n"
                      "aws = [fetch(i) for i in range(3)]", 3),
    "attribute": ("class Box:\n    pass\nboxes = [Box() for _ in range(3)]\n"
                  "for i, box in enumerate(boxes):\n    box.call = echo(value=i)\n"
                  "aws = [box.call for box in boxes]", 3),
    "subscript": ("d = {}\nfor i in range(3):\n    d[i] = echo(value=i)\n"
                  "aws = list(d.values())", 3),
    "append": ("aws = []\nfor i in range(3):\n    aws.append(echo(value=i))", 3),
    "extend": ("aws = []\nfor i in range(3):\n    aws.extend([echo(value=i)])", 3),
    "loop_concatenation": ("aws = []\nfor i in range(3):\n    aws += [echo(value=i)]", 3),
    "pairs_unpacked": ("pairs = [(i, echo(value=i)) for i in range(3)]\n"
                       "aws = [call for _, call in pairs]", 3),
    "settled_values": ("aws = [{'value': i} for i in range(3)]", 0),
    "settled_and_pending": ("aws = [{'value': 0}, echo(value=1), {'value': 2}]", 1),
}

# Each entry point turns `aws` into `vals`, the three results (in any order).
ENTRY_POINTS = {
    "await": "vals = [await a for a in list(aws)]",
    "gather": "vals = await asyncio.gather(*aws)",
    "wait": "done, _ = await asyncio.wait(list(aws))\nvals = [t.result() for t in done]",
    "as_completed": "vals = [await f for f in asyncio.as_completed(list(aws))]",
    "create_task": "tasks = [asyncio.create_task(a) for a in aws]\n"
                   "vals = [await t for t in tasks]",
    "task_group": "async with asyncio.TaskGroup() as tg:\n"
                  "    tasks = [tg.create_task(a) for a in aws]\n"
                  "vals = [t.result() for t in tasks]",
    "ensure_future": "futures = [asyncio.ensure_future(a) for a in aws]\n"
                     "vals = [await f for f in futures]",
    "wait_for": "vals = await asyncio.gather(*(asyncio.wait_for(a, timeout=5) for a in aws))",
    "shield": "vals = [await asyncio.shield(a) for a in list(aws)]",
}


# `await` is syntax, not an entry point: awaiting a plain value raises TypeError, as in Python.
MATRIX = [(route, entry) for route in ROUTES for entry in ENTRY_POINTS
          if not (entry == "await" and route.startswith("settled"))]


@pytest.mark.parametrize("route, entry", MATRIX)
def test_route_through_entry_point_gives_values_and_overlaps(tier, host, route, entry):
    store, made = ROUTES[route]
    code = (f"import asyncio\n{store}\n{ENTRY_POINTS[entry]}\n"
            "sorted(v['value'] for v in vals)")
    outcome = run(tier, host, code)
    assert outcome.status == "ok", outcome.error
    assert outcome.value == [0, 1, 2]
    assert len(host.calls) == made
    assert host.max_in_flight == made          # all in flight at once: they overlapped


@pytest.mark.parametrize("route", ["dict_comprehension", "map_lambda", "helper_return",
                                   "attribute", "set_comprehension", "settled_and_pending"])
def test_routes_inside_a_coroutine_run_by_asyncio_run(tier, host, route):
    store, made = ROUTES[route]
    body = "\n".join("    " + line for line in
                     f"{store}\n{ENTRY_POINTS['gather']}\nreturn vals".splitlines())
    code = f"import asyncio\nasync def main():\n{body}\n" \
           "sorted(v['value'] for v in asyncio.run(main()))"
    outcome = run(tier, host, code)
    assert outcome.status == "ok", outcome.error
    assert outcome.value == [0, 1, 2]
    assert host.max_in_flight == made


def test_calls_run_one_by_one_do_not_overlap(tier, host):
    # the control for the matrix: awaited as they are made, calls never overlap
    code = "import asyncio\nvals = [await echo(value=i) for i in range(3)]\nlen(vals)"
    assert run(tier, host, code).value == 3
    assert host.max_in_flight == 1


# ---- plain values at every entry point ------------------------------------------------------

@pytest.mark.parametrize("expression, value", [
    ("await asyncio.gather(5, 'x', None)", [5, "x", None]),
    ("await asyncio.create_task(5)", 5),
    ("await asyncio.ensure_future(5)", 5),
    ("await asyncio.wait_for(5, timeout=1)", 5),
    ("await asyncio.shield(5)", 5),
    ("[t.result() for t in (await asyncio.wait([5]))[0]]", [5]),
    ("[await f for f in asyncio.as_completed([5])]", [5]),
])
def test_entry_points_take_a_value_as_already_completed(tier, host, expression, value):
    assert run(tier, host, f"import asyncio\n{expression}").value == value


def test_await_of_a_plain_value_keeps_pythons_rule(tier, host):
    outcome = run(tier, host, "import asyncio\nawait asyncio.sleep(0)\nawait 5")
    assert (outcome.error.type, outcome.error.message) == (
        "TypeError", "'int' object can't be awaited" if tier.__class__ is WasmSandbox
        else "object int can't be used in 'await' expression")


def test_task_group_takes_a_value_and_a_synchronous_result(tier, host):
    code = ("import asyncio\ndef plain():\n    return echo(value=1)['value']\n"
            "async def main():\n    x = plain()\n    async with asyncio.TaskGroup() as tg:\n"
            "        t = tg.create_task(x)\n        u = tg.create_task(7)\n"
            "    return [t.result(), u.result()]\nasyncio.run(main())")
    assert run(tier, host, code).value == [1, 7]


# ---- a pending call used as its value -------------------------------------------------------

def pending(value, use):
    """A program where `p` is a pending call of ident(value=...) (it is later gathered) and
    `result` is `use` evaluated before that. `kind` is what `p` is: `type` under another
    name, since `type(p)` itself gives the value's type (cm_guest/settling.py)."""
    return (f"import asyncio, json, copy\nbox = {{}}\nbox['p'] = ident(value={value!r})\n"
            f"p = box['p']\nkind_of = type\nkind = kind_of(p).__name__\n{use}\n"
            "await asyncio.gather(*box.values())\n[kind, result]")


@pytest.mark.parametrize("value, use, expected", [
    (41, "result = [p + 1, 1 + p, p * 2, -p, p // 2, p % 5, 2 ** 1 + p, p ** 1]",
     [42, 42, 82, -41, 20, 1, 43, 41]),
    (41, "result = [p == 41, p != 41, p < 50, 50 > p, p >= 41, bool(p), not p]",
     [True, False, True, True, True, True, False]),
    (41, "result = [int(p), float(p), round(p), abs(p), divmod(p, 5), list(range(50))[p]]",
     [41, 41.0, 41, 41, {"$tuple": [8, 1]}, 41]),
    (41, "result = [str(p), repr(p), f'{p:>4}', '%d!' % p, isinstance(p, int)]",
     ["41", "41", "  41", "41!", True]),
    (41, "x = p\nx += 1\nresult = x", 42),
    ({"a": [1, 2], "b": "x"},
     "result = [p['a'], p.get('b'), list(p), len(p), 'a' in p, sorted(p.items()), dict(p)]",
     [[1, 2], "x", ["a", "b"], 2, True,
      [{"$tuple": ["a", [1, 2]]}, {"$tuple": ["b", "x"]}], {"a": [1, 2], "b": "x"}]),
    ({"a": 1}, "result = [json.dumps(p), json.dumps([p, p]), copy.deepcopy(p), {**p}]",
     ['{"a": 1}', '[{"a": 1}, {"a": 1}]', {"a": 1}, {"a": 1}]),
    ({"a": 1}, "p['b'] = 2\nresult = [p, sorted(p)]", [{"a": 1, "b": 2}, ["a", "b"]]),
    ("hello", "result = [p.upper(), p[1:3], p + '!', '<' + p, p * 2, 'ell' in p, len(p)]",
     ["HELLO", "el", "hello!", "<hello", "hellohello", True, 5]),
    ([3, 1, 2], "result = [sorted(p), sum(p), max(p), [x * 2 for x in p], p[-1]]",
     [[1, 2, 3], 6, 3, [6, 2, 4], 2]),
    (None, "result = [p == None, bool(p), str(p)]", [True, False, "None"]),
])
def test_a_pending_call_is_its_value_wherever_used_as_one(tier, host, value, use, expected):
    outcome = run(tier, host, pending(value, use))
    assert outcome.status == "ok", outcome.error
    assert outcome.value == ["PendingCall", expected]


def test_print_and_tool_arguments_use_the_value(tier, host):
    code = pending("hi", "print(p)\nresult = ident(value=[p, {'k': p}])")
    outcome = run(tier, host, code)
    assert outcome.stdout == "hi\n"
    assert outcome.value == ["PendingCall", ["hi", {"k": "hi"}]]


def test_pending_calls_in_the_runs_value_are_settled(tier, host):
    code = ("import asyncio\ndef keep(x):\n    return x\n"
            "async def main():\n    return keep([echo(value=i) for i in range(3)])\n"
            "{'calls': asyncio.run(main())}")
    outcome = run(tier, host, code)
    assert outcome.value == {"calls": [{"value": i} for i in range(3)]}
    assert [len(b["calls"]) for b in host.batches if b["calls"]] == [3]


def test_a_failed_pending_call_raises_where_its_value_is_used(tier, host):
    code = ("import asyncio\nbox = {'p': fail(message='boom')}\n"
            "try:\n    box['p']['x']\n    r = 'no error'\n"
            "except ToolError as exc:\n    r = [exc.tool_name, exc.message]\n"
            "rs = await asyncio.gather(*box.values(), return_exceptions=True)\n"
            "[r, type(rs[0]).__name__]")
    assert run(tier, host, code).value == [["fail", "boom"], "ToolError"]


def test_a_failed_call_in_the_runs_value_is_a_program_error(tier, host):
    code = "async def main():\n    return fail(message='boom')\nimport asyncio\n" \
           "{'r': asyncio.run(main())}"
    outcome = run(tier, host, code)
    assert (outcome.error.type, outcome.error.message) == ("ToolError", "fail: boom")


# ---- what the plain-value call sites keep -----------------------------------------------------

def test_calls_whose_result_stays_a_value_return_the_plain_value(tier, host):
    code = ("import asyncio, json\nasync def main():\n"
            "    x = ident(value=1)\n    names = [ident(value=n) for n in 'ab']\n"
            "    r = ident(value=None)\n"
            "    return [type(x).__name__, x + 1, isinstance(x, int), r is None,\n"
            "            ', '.join(names), json.dumps(names), echo(value=2)['value']]\n"
            "asyncio.run(main())")
    assert run(tier, host, code).value == ["int", 2, True, True, "a, b", '["a", "b"]', 2]


def test_a_coroutines_result_used_as_a_value_stays_a_value(tier, host):
    code = ("import asyncio\nasync def get(i):\n    return ident(value=i)\n"
            "async def main():\n    user = ident(value=None)\n    n = await get(1)\n"
            "    return {'user': user, 'n': n}\nr = asyncio.run(main())\n"
            "[r['user'] is None, type(r['n']).__name__]")
    assert run(tier, host, code).value == [True, "int"]


def test_sync_code_always_gets_values(tier, host):
    code = ("def fetch(i):\n    return ident(value=i)\nxs = [fetch(i) for i in range(3)]\n"
            "[type(x).__name__ for x in xs]")
    assert run(tier, host, code).value == ["int", "int", "int"]
    assert host.max_in_flight == 1


# ---- batching, ordering, budget, cancellation --------------------------------------------------

def test_a_plain_call_sends_the_queued_calls_first_in_submission_order(tier, host):
    code = ("import asyncio\naws = [echo(value=i) for i in range(2)]\n"
            "x = echo(value=9)['value']\nvals = await asyncio.gather(*aws)\n"
            "[x, [v['value'] for v in vals]]")
    assert run(tier, host, code).value == [9, [0, 1]]
    assert [[c["id"] for c in b["calls"]] for b in host.batches if b["calls"]] == [[1, 2, 3]]


def test_large_queued_calls_go_out_in_batches_the_host_accepts(tier, host):
    code = ("import asyncio\naws = [echo(value=str(i) * 900) for i in range(5)]\n"
            "[len(v['value']) for v in await asyncio.gather(*aws)]")
    outcome = run(tier, host, code, request_bytes=1000)
    assert outcome.value == [900] * 5
    assert [len(b["calls"]) for b in host.batches if b["calls"]] == [2, 2, 1]


def test_calls_nobody_uses_still_run_before_the_run_ends(tier, host):
    code = ("import asyncio\ndef keep(x):\n    pass\n"
            "keep([echo(value=i) for i in range(2)])\nawait asyncio.sleep(0)\n'done'")
    assert run(tier, host, code).value == "done"
    assert [c["args"] for c in host.calls] == [{"value": 0}, {"value": 1}]


def test_the_subcall_budget_counts_pending_calls(tier, host):
    code = "import asyncio\nd = {i: echo(value=i) for i in range(6)}\n" \
           "await asyncio.gather(*d.values())"
    outcome = run(tier, host, code, max_subcalls=5)
    assert isinstance(outcome.error, SubcallLimitExceeded)
    assert host.calls == []                    # the over-budget batch never reached the host


def test_a_cancelled_task_cancels_its_call_on_the_host(tier, host):
    code = ("import asyncio\nd = {'p': hang()}\ntask = asyncio.create_task(d['p'])\n"
            "await asyncio.sleep(0.05)\ntask.cancel()\n"
            "try:\n    await task\nexcept asyncio.CancelledError:\n    pass\n"
            "try:\n    d['p']['x']\n    r = 'no error'\n"
            "except asyncio.CancelledError:\n    r = 'cancelled'\n"
            "[r, echo(value=2)['value']]")
    outcome = run(tier, host, code)
    assert outcome.value == ["cancelled", 2]
    [told] = [b for b in host.batches if b["cancel"]]      # with the next batch
    assert (told["cancel"], [c["id"] for c in told["calls"]]) == ([1], [2])


def test_calls_left_when_the_run_ends_are_the_hosts_to_abort(tier, host):
    # asyncio.run cancels the tasks still running; no batch is made just to say so
    code = "import asyncio\ntasks = [asyncio.create_task(hang()) for _ in range(2)]\n" \
           "await asyncio.sleep(0.05)\n'left'"
    assert run(tier, host, code).value == "left"
    assert all(b["cancel"] == [] for b in host.batches)


def test_a_call_cancelled_before_it_was_sent_never_reaches_the_host(tier, host):
    code = ("import asyncio\nd = {'p': echo(value=1)}\ntask = asyncio.create_task(d['p'])\n"
            "await asyncio.sleep(0)\ntask.cancel()\n"
            "try:\n    await task\nexcept asyncio.CancelledError:\n    pass\n'ok'")
    assert run(tier, host, code).value == "ok"
    assert host.calls == []


def test_a_call_another_task_still_awaits_is_not_cancelled(tier, host):
    code = ("import asyncio\nd = {'p': echo(value=1)}\n"
            "a = asyncio.create_task(d['p'])\nb = asyncio.create_task(d['p'])\n"
            "await asyncio.sleep(0)\na.cancel()\n"
            "[(await b)['value'], a.cancelled()]")
    assert run(tier, host, code).value == [1, True]
    assert host.cancelled == []


def test_wait_for_timeout_cancels_the_call(tier, host):
    code = ("import asyncio\nd = {'p': hang()}\n"
            "try:\n    await asyncio.wait_for(d['p'], timeout=0.05)\n    r = 'finished'\n"
            "except TimeoutError:\n    r = 'timed out'\n[r, echo(value=2)['value']]")
    assert run(tier, host, code).value == ["timed out", 2]
    assert host.cancelled == [1]
