"""A fresh instance per run: a run never sees another run's state, one after another or
at the same time."""

import concurrent.futures

from codemode.sandbox import ParamSpec, RunRequest, ToolSpec, WasmSandbox

from .conftest import echo, noop

# What one run leaves behind everywhere a program can write: its globals, a module's
# attributes, builtins, sys; the next run reports what it finds.
LEAVE = """
import json, sys
left = "run-{n}"
json.left = left
sys.left = left
b = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
b["left_builtin"] = left
"""
FIND = """
import json, sys
b = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
[name for name, seen in (("globals", "left" in globals()), ("json", hasattr(json, "left")),
 ("builtins", "left_builtin" in b), ("sys", hasattr(sys, "left"))) if seen]
"""




def test_a_run_never_sees_another_runs_state_in_turn_or_at_once():
    sandbox = WasmSandbox()
    same_run = sandbox.run(RunRequest(code=LEAVE.format(n=0) + FIND), noop)
    assert same_run.value == ["globals", "json", "builtins", "sys"]      # the probe sees
    for n in range(4):
        left = sandbox.run(RunRequest(code=LEAVE.format(n=n)), noop)
        assert left.status == "ok", left.error
        found = sandbox.run(RunRequest(code=FIND), noop)
        assert found.status == "ok" and found.value == [], found
    with concurrent.futures.ThreadPoolExecutor(4) as threads:
        runs = [threads.submit(sandbox.run, RunRequest(code=(LEAVE.format(n=n) if n % 2
                                                               else FIND)), noop)
                for n in range(12)]
        outcomes = [r.result() for r in runs]
    assert all(o.status == "ok" for o in outcomes)
    assert [o.value for n, o in enumerate(outcomes) if n % 2 == 0] == [[]] * 6


# What else a run can leave, beyond names: objects on its heap (found again through the
# garbage collector), its program's source (linecache, tracebacks), unflushed output, an
# event loop, a changed recursion limit, a pending exception, a replaced stream. The probe
# names each kind it finds.
LEAVE_MORE = """
import asyncio, gc, linecache, sys
# leave-marker-{n}
class Marker:
    pass
keep = Marker()
keep.tag = "left-{n}"
sys.setrecursionlimit(4321)
loop = asyncio.new_event_loop()
asyncio.set_event_loop(loop)
sys.stdout.write("unflushed-{n}")        # no newline: left in the stream if buffered
sys.stderr.write("unflushed-err-{n}")
try:
    raise KeyError("left-{n}")
except KeyError:
    pass
sys.last_value = KeyError("left-{n}")
sys.displayhook = lambda value: None
"""
FIND_MORE = """
import asyncio, gc, linecache, sys
def seen_on_heap():
    for obj in gc.get_objects():
        try:
            if type(obj).__name__ == "Marker" and getattr(obj, "tag", "").startswith("left-"):
                return True
        except Exception:
            pass
    return False
def left_loop():
    try:
        return asyncio.get_event_loop_policy()._local._loop is not None
    except AttributeError:
        return False
[name for name, seen in (
    ("heap", seen_on_heap()),
    ("linecache", any("leave-" + "marker-" in "".join(entry[2])
                      for entry in linecache.cache.values()
                      if isinstance(entry, tuple) and len(entry) == 4)),
    ("recursion limit", sys.getrecursionlimit() == 4321),
    ("event loop", left_loop()),
    ("last exception", getattr(sys, "last_value", None) is not None),
    ("displayhook", sys.displayhook is not sys.__displayhook__),
) if seen]
"""
SEEN_MORE = ["heap", "linecache", "recursion limit", "event loop", "last exception",
             "displayhook"]


def test_a_run_never_sees_another_runs_heap_source_output_or_runtime_state():
    sandbox = WasmSandbox()
    same_run = sandbox.run(RunRequest(code=LEAVE_MORE.format(n=0) + FIND_MORE), noop)
    assert same_run.status == "ok", same_run.error
    assert same_run.value == SEEN_MORE                      # the probe sees each kind
    for n in range(3):
        left = sandbox.run(RunRequest(code=LEAVE_MORE.format(n=n)), noop)
        assert left.status == "ok", left.error
        assert (left.stdout, left.stderr) == (f"unflushed-{n}", f"unflushed-err-{n}")
        found = sandbox.run(RunRequest(code=FIND_MORE), noop)
        assert found.status == "ok" and found.value == [], found
        assert (found.stdout, found.stderr) == ("", "")


# What the guest makes for a run before the run's request is known (`runtime.Prepared`: in
# the snapshot, and again in the pool's warm-up of an instance): the output streams and
# their sinks, the bridge (its call numbering), the globals' `call_tool` and the tables it
# finds tools in, the builtins. A run that tampers with each, and the probe that looks.
LEAVE_PREPARED = """
import sys
sys.stdout.left = sys.stdout.buffer.left = sys.stderr.left = "left-{n}"
call_tool.left = "left-{n}"
cells = {{type(c.cell_contents).__name__: c.cell_contents for c in call_tool.__closure__}}
cells["Bridge"]._next_id = 1000
for table in (c.cell_contents for c in call_tool.__closure__ if type(c.cell_contents) is dict):
    table["left_tool"] = echo
__builtins__["left_builtin"] = True
tools._bindings["left_tool"] = echo
echo(value=1)
"""
FIND_PREPARED = """
import sys
cells = [c.cell_contents for c in call_tool.__closure__]
bridge = next(c for c in cells if type(c).__name__ == "Bridge")
first_id = bridge._next_id
echo(value=1)
[name for name, seen in (
    ("streams", any(hasattr(s, "left") for s in (sys.stdout, sys.stdout.buffer, sys.stderr))),
    ("call_tool", hasattr(call_tool, "left")),
    ("call numbering", (first_id, bridge._next_id) != (0, 1)),
    ("tool tables", any("left_tool" in c for c in cells if type(c) is dict)),
    ("tools", "left_tool" in dir(tools)),
    ("builtins", "left_builtin" in __builtins__),
) if seen]
"""
SEEN_PREPARED = ["streams", "call_tool", "call numbering", "tool tables", "tools", "builtins"]
ECHO_TOOL = ToolSpec(name="echo", alias="echo", params=(ParamSpec(name="value"),))


def test_nothing_the_guest_prepares_before_a_run_carries_what_a_run_left_in_it():
    sandbox = WasmSandbox()
    same_run = sandbox.run(RunRequest(code=LEAVE_PREPARED.format(n=0) + FIND_PREPARED,
                                      tools=(ECHO_TOOL,)), echo)
    assert same_run.status == "ok", same_run.error
    assert same_run.value == SEEN_PREPARED                  # the probe sees each kind
    for n in range(3):
        left = sandbox.run(RunRequest(code=LEAVE_PREPARED.format(n=n), tools=(ECHO_TOOL,)),
                           echo)
        assert left.status == "ok", left.error
        found = sandbox.run(RunRequest(code=FIND_PREPARED, tools=(ECHO_TOOL,)), echo)
        assert found.status == "ok" and found.value == [], found


def test_the_guest_runtime_hands_each_prepared_state_to_one_run_only():
    """The guest runtime's own code, under this Python: what a run left in its prepared
    objects is not found by the next run in the same interpreter, whether that run's state
    was prepared ahead (`runtime.prepare`, as the snapshot and the pool's warm-up do) or not
    (made at its start): each `Prepared` serves one run. (In the sandbox each run also has a
    fresh instance; this holds without that.)"""
    import json
    import sys

    from codemode.sandbox.guest.cm_guest import runtime

    def echo_dispatch(batch):
        calls = json.loads(batch)["calls"]
        return json.dumps({"results": [{"id": c["id"], "ok": True, "value": c["args"]}
                                       for c in calls]})

    def run(code):
        request = json.dumps({"code": code, "limits": {}, "tools": [
            {"name": "echo", "alias": "echo", "params": [{"name": "value"}]}]})
        streams = sys.stdout, sys.stderr
        try:
            answer = runtime.run(request, echo_dispatch, lambda seconds: None,
                                 lambda fd: lambda data: None)
        finally:
            sys.stdout, sys.stderr = streams
        outcome = json.loads(answer)
        assert outcome["status"] == "ok", outcome
        return outcome.get("value")

    runtime.prepare()
    assert run(LEAVE_PREPARED.format(n=0) + FIND_PREPARED) == SEEN_PREPARED
    for prepared_ahead in (True, False):
        if prepared_ahead:
            runtime.prepare()
        run(LEAVE_PREPARED.format(n=1))
        if prepared_ahead:
            runtime.prepare()
        assert run(FIND_PREPARED) == []
    runtime.forget_runs()
