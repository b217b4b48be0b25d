"""RestrictedSandbox on its own: refused introspection, imports and writes, host secrets
out of reach, best-effort limits. The contract it shares with WasmSandbox is in
test_sandbox_contract.py."""

import json
import random
import threading
import time

import pytest
from msgspec import UNSET

import codemode.sandbox._restricted as restricted_module
from codemode.sandbox import (
    HostDispatchFailed,
    MemoryLimitExceeded,
    OutputLimitExceeded,
    RestrictedSandbox,
    RunAborted,
    RunRequest,
    SandboxLimits,
    TimeLimitExceeded,
    _restricted_guards,
    _restricted_modules,
    _restricted_policy,
    _restricted_run,
)
from codemode.sandbox.guest.cm_guest import runtime as guest_runtime

from .conftest import STEP_TOOLS, EchoHost, StepHost, echo_tool


def run(sandbox, host, code, tools=(), cancel=None, **limits):
    # A generous wall clock, so the limit a test is about fires first on a loaded machine.
    request = RunRequest(code=code, tools=tuple(tools),
                         limits=SandboxLimits(**{"wall_clock_s": 30.0, **limits}))
    if cancel is None:
        return sandbox.run(request, host)
    return sandbox.run(request, host, cancel)


@pytest.fixture(scope="module")
def restricted():
    return RestrictedSandbox()


# ---- the restricted tier on its own --------------------------------------------------------

@pytest.mark.parametrize("code, line, message", [
    ("().__class__.__bases__[0].__subclasses__()", 1,
     '"__subclasses__" is an invalid attribute name because it starts with "_".'),
    ("().__class__", 1, '"__class__" is an invalid attribute name because it starts with "_".'),
    ("def f(): pass\nf.__globals__", 2,
     '"__globals__" is an invalid attribute name because it starts with "_".'),
    ("try:\n    1/0\nexcept Exception as e:\n    e.__traceback__", 4,
     '"__traceback__" is an invalid attribute name because it starts with "_".'),
    ("def g():\n    yield 1\ng().gi_frame.f_globals", 3,
     '"f_globals" is a restricted name, that is forbidden to access in RestrictedPython.'),
    ("import sys", None, None),
])
def test_dunder_traversal_does_not_compile(restricted, host, code, line, message):
    outcome = run(restricted, host, code)
    if message is None:                       # imports of `sys` fail at run time instead
        assert outcome.error.type == "ModuleNotFoundError"
        return
    assert (outcome.error.type, outcome.error.message) == (
        "SyntaxError", f"{message} (<program>, line {line})")
    assert f'File "<program>", line {line}' in outcome.error.traceback


@pytest.mark.parametrize("code", [
    "'{0.__class__}'.format(1)",
    "str.format('{0.__class__}', 1)",
    "'{x.__class__}'.format_map({'x': 1})",
    "f = '{0}'.format\nf(call_tool)",
    "getattr('{0.__class__}', 'format')(1)",
    "import operator\noperator.methodcaller('format', 1)('{0.__class__}')",
])
def test_string_formatting_with_traversal_is_refused(restricted, host, code):
    outcome = run(restricted, host, code)
    assert (outcome.error.type, outcome.error.message) == (
        "NotImplementedError", "Using the format*() methods of `str` is not safe")


@pytest.mark.parametrize("code, kind, message", [
    ("getattr(call_tool, '__globals__')", "AttributeError",
     '"__globals__" is an invalid attribute name because it starts with "_"'),
    ("import operator\noperator.attrgetter('__globals__')(call_tool)", "AttributeError",
     '"__globals__" is an invalid attribute name because it starts with "_"'),
    ("def f(): pass\nimport operator\noperator.attrgetter('gi_frame')(f)", "AttributeError",
     '"gi_frame" is a restricted name, that is forbidden to access in the sandbox'),
    ("import string\nstring.Formatter", "AttributeError",
     "module 'string' has no attribute 'Formatter' in the sandbox"),
    ("import typing\ntyping.sys", "AttributeError",
     "module 'typing' has no attribute 'sys' in the sandbox"),
    ("import dataclasses\ndataclasses.inspect.getmodule", "AttributeError",
     "module 'inspect' has no attribute 'getmodule' in the sandbox"),
    ("import inspect\ninspect.currentframe", "AttributeError",
     "module 'inspect' has no attribute 'currentframe' in the sandbox"),
    ("import asyncio\nasyncio.base_events", "AttributeError",
     "module 'asyncio' has no attribute 'base_events' in the sandbox"),
    ("import typing\ntyping.get_type_hints", "AttributeError",
     "module 'typing' has no attribute 'get_type_hints' in the sandbox"),
    ("import io\nio.open('/etc/passwd')", "AttributeError",
     "module 'io' has no attribute 'open' in the sandbox"),
    ("open('/etc/passwd')", "NameError", "name 'open' is not defined"),
    ("type('X', (), {})", "TypeError",
     "type() takes 1 argument in the sandbox; creating classes with type(name, bases, dict) "
     "is not available"),
])
def test_introspection_routes_are_refused_at_run_time(restricted, host, code, kind, message):
    outcome = run(restricted, host, code)
    assert (outcome.error.type, outcome.error.message) == (kind, message)


def test_inspect_is_signatures_and_docstrings_only(restricted, host):
    outcome = run(restricted, host, "import inspect\ndir(inspect)")
    assert outcome.value == ["Parameter", "cleandoc", "getdoc", "signature"]


@pytest.mark.parametrize("module", ["os", "sys", "os.path", "weakref", "threading",
                                    "ctypes", "importlib", "gc", "pickle", "socket", "pathlib",
                                    "logging", "tempfile", "zoneinfo", "queue"])
def test_host_modules_are_not_importable(restricted, host, module):
    outcome = run(restricted, host, f"import {module}")
    assert outcome.error.type == "ModuleNotFoundError"
    top = module.partition(".")[0]
    assert outcome.error.message == f"No module named {top!r} (not available in the sandbox)"


def test_from_import_of_a_refused_module_is_refused(restricted, host):
    outcome = run(restricted, host, "from os import environ")
    assert outcome.error.message == "No module named 'os' (not available in the sandbox)"


def test_a_secret_in_host_module_globals_is_not_reachable(restricted, host, monkeypatch):
    secret = "HOST-SECRET-" + "7" * 12
    for module in (guest_runtime, restricted_module,    # call_tool's globals; this tier's
                   _restricted_policy, _restricted_run, _restricted_modules,
                   _restricted_guards):
        monkeypatch.setattr(module, "HOST_API_KEY", secret, raising=False)
    attempts = [
        "call_tool.__globals__['HOST_API_KEY']",
        "getattr(call_tool, '__glo' + 'bals__')['HOST_API_KEY']",
        "'{0.__globals__[HOST_API_KEY]}'.format(call_tool)",
        "'{t.__globals__[HOST_API_KEY]}'.format_map({'t': call_tool})",
        "import operator\noperator.attrgetter('__globals__')(call_tool)['HOST_API_KEY']",
        "import functools\nclass W:\n    pass\nw = W()\n"
        "functools.update_wrapper(w, call_tool, assigned=('__globals__',))",
        "import dataclasses\ndataclasses.inspect.getmodule(call_tool).HOST_API_KEY",
        "[m for m in dir(tools)]",
        "import asyncio\nasyncio.get_running_loop()",
        "try:\n    echo(value=set())\nexcept TypeError as e:\n    r = str(e)\nr",
    ]
    for code in attempts:
        outcome = run(restricted, host, code, tools=[echo_tool()])
        dumped = json.dumps([outcome.stdout, outcome.stderr, outcome.value is not UNSET
                             and outcome.value, str(outcome.error), host.calls])
        assert secret not in dumped, code


@pytest.mark.parametrize("code, message", [
    ("import json\njson.JSONEncoder.default = lambda self, o: 'poisoned'",
     "a type object is read-only in the sandbox (only the program's own objects and plain "
     "containers can be changed)"),
    ("import json\nsetattr(json, 'dumps', len)",
     "a _ModuleView object is read-only in the sandbox (only the program's own objects and "
     "plain containers can be changed)"),
    ("echo.name = 'read_secret'",
     "a Binding object is read-only in the sandbox (only the program's own objects and "
     "plain containers can be changed)"),
])
def test_host_objects_are_read_only(restricted, host, code, message):
    outcome = run(restricted, host, code, tools=[echo_tool()])
    assert (outcome.error.type, outcome.error.message) == ("TypeError", message)


def test_process_wide_state_is_left_alone(restricted, host):
    import csv
    import decimal
    before = (random.getstate(), decimal.DefaultContext.prec, csv.list_dialects())
    code = ("import random, decimal, csv\nrandom.seed(1)\ndecimal.DefaultContext.prec = 3\n"
            "r = [hasattr(csv, 'register_dialect')]\nr")
    outcome = run(restricted, host, code)
    assert outcome.value == [False]
    assert (random.getstate(), decimal.DefaultContext.prec, csv.list_dialects()) == before


def test_the_programs_own_objects_are_writable(restricted, host):
    code = ("import dataclasses, collections, types\n"
            "class E(Exception):\n    def __init__(self, message, code):\n"
            "        super().__init__(message)\n        self.code = code\n"
            "@dataclasses.dataclass\nclass P:\n    x: int\n    y: int = 0\n"
            "p = P(1)\np.y = 2\nP.label = 'point'\n"
            "ns = types.SimpleNamespace()\nns.a = 1\n"
            "N = collections.namedtuple('N', 'a b')\n"
            "try:\n    try:\n        {}['k']\n    except KeyError as k:\n"
            "        raise E('boom', 7) from k\n"
            "except E as e:\n    err = [str(e), e.code, type(e.__cause__).__name__]\n"
            "[err, dataclasses.asdict(p), P.label, ns.a, N(1, 2)._replace(b=5)._asdict()]")
    outcome = run(restricted, host, code)
    assert outcome.value == [["boom", 7, "KeyError"], {"x": 1, "y": 2}, "point", 1,
                             {"a": 1, "b": 5}]


@pytest.mark.parametrize("code, message", [
    ("class A:\n    def __repr__(self):\n        return 'x'",
     '"__repr__" is an invalid variable name because it starts with "_" (<program>, line 2)'),
    ("class A:\n    def __del__(self):\n        pass",
     '"__del__" is an invalid method name in the sandbox. (<program>, line 2)'),
    ("match 1:\n    case 1:\n        pass", "Match statements are not allowed. (<program>, "
                                            "line 1)"),
])
def test_unsupported_syntax_is_a_syntax_error(restricted, host, code, message):
    outcome = run(restricted, host, code)
    assert (outcome.error.type, outcome.error.message) == ("SyntaxError", message)


def test_print_pprint_and_warnings_go_to_the_captured_streams(restricted, host):
    code = ("import io, pprint, warnings\nbuf = io.StringIO()\nprint('to buf', file=buf)\n"
            "print('out', end='!')\npprint.pprint({'a': 1})\nwarnings.warn('careful')\n"
            "buf.getvalue()")
    outcome = run(restricted, host, code)
    assert (outcome.stdout, outcome.stderr, outcome.value) == (
        "out!{'a': 1}\n", "UserWarning: careful\n", "to buf\n")


@pytest.mark.parametrize("code", [
    "import asyncio\nawait asyncio.get_running_loop().run_in_executor(None, len, [])",
    "import asyncio\nawait asyncio.get_running_loop().create_connection(None, '127.0.0.1', 9)",
    "import asyncio\nawait asyncio.get_running_loop().subprocess_exec(None, 'true')",
])
def test_threads_sockets_and_processes_are_refused_on_the_loop(restricted, host, code):
    outcome = run(restricted, host, code)
    assert outcome.error.type == "PermissionError"
    assert outcome.error.message.endswith("is not available in the sandbox")


@pytest.mark.parametrize("code, limit", [
    ("'x' * 10**10", 10**10),
    ("[0] * 10**9", 8 * 10**9),
    ("s = 'x' * (40 * 10**6)\nwhile True:\n    s = s + s", 80_000_000),
    ("s = 'x' * (40 * 10**6)\nwhile True:\n    s += s", 80_000_000),
    ("x = 1 << (10**9)", 125_000_000),
])
def test_obviously_huge_allocations_are_a_memory_limit(restricted, host, code, limit):
    outcome = run(restricted, host, code, memory_bytes=64 << 20)
    assert isinstance(outcome.error, MemoryLimitExceeded)
    assert outcome.error.message == (f"the program tried to allocate about {limit} bytes, "
                                     f"over its limit of {64 << 20}")


def pending(value, use):
    """A program where `p` is a pending tool call of ident(value=...) (it is gathered
    later), used as `use` first."""
    return (f"import asyncio\nbox = {{'p': ident(value={value!r})}}\np = box['p']\n{use}\n"
            "await asyncio.gather(*box.values())")


@pytest.mark.parametrize("use", ["p.format(1)", "getattr(p, 'format')(1)",
                                 "p.format_map({})"])
def test_a_pending_call_cannot_format_its_way_past_the_guards(restricted, use):
    outcome = run(restricted, StepHost(), pending("{0.__class__}", use), tools=STEP_TOOLS)
    assert (outcome.error.type, outcome.error.message) == (
        "NotImplementedError", "Using the format*() methods of `str` is not safe")


@pytest.mark.parametrize("value, use, limit", [
    ("x", "p * 10**10", 10**10),
    ("x", "10**10 * p", 10**10),
    ([0], "x = p\nx *= 10**9", 8 * 10**9),
    (1, "p << 10**9", 125_000_000),
])
def test_a_pending_call_meets_the_size_checks_of_its_value(restricted, value, use, limit):
    outcome = run(restricted, StepHost(), pending(value, use), tools=STEP_TOOLS,
                  memory_bytes=64 << 20)
    assert isinstance(outcome.error, MemoryLimitExceeded)
    assert outcome.error.message == (f"the program tried to allocate about {limit} bytes, "
                                     f"over its limit of {64 << 20}")


def test_a_pending_call_holding_a_dict_is_writable_like_the_dict(restricted):
    code = pending({"a": 1}, "p['b'] = 2\nr = dict(p)") + "\nr"
    assert run(restricted, StepHost(), code, tools=STEP_TOOLS).value == {"a": 1, "b": 2}


def test_growth_of_the_process_is_a_memory_limit(restricted, host):
    code = "chunks = []\nwhile True:\n    chunks.append('x' * 10**6)"
    outcome = run(restricted, host, code, memory_bytes=64 << 20)
    assert isinstance(outcome.error, MemoryLimitExceeded)
    assert outcome.error.message == ("the process grew by more than the run's memory limit "
                                     f"of {64 << 20} bytes")


def test_a_caught_limit_ends_the_program_at_its_next_handler(restricted, host):
    code = ("n = 0\nfor i in range(10**6):\n    try:\n        print('y' * 100)\n"
            "    except BaseException:\n        n += 1\n'done'")
    outcome = run(restricted, host, code, output_bytes=1000)
    assert isinstance(outcome.error, OutputLimitExceeded)
    assert outcome.value is UNSET            # the handler re-raised: 'done' was never reached


def test_catching_memory_error_does_not_undo_the_limit(restricted, host):
    code = "try:\n    'x' * 10**10\nexcept MemoryError:\n    pass\n'survived'"
    outcome = run(restricted, host, code, memory_bytes=64 << 20)
    assert isinstance(outcome.error, MemoryLimitExceeded)
    assert outcome.value is UNSET


def test_huge_integer_products_are_refused_up_front(restricted, host):
    started = time.monotonic()
    outcome = run(restricted, host, "x = 3 ** (10 ** 8)")
    assert outcome.error.type == "ValueError"
    assert outcome.error.message.startswith("the result of ** would be an integer of about "
                                            "100000001 bits")
    assert time.monotonic() - started < 5      # computing it would take far longer


@pytest.mark.parametrize("code", [
    "sum(range(10**12))",
    "import itertools\nmax(itertools.count())",
    "x = [0 for _ in iter(int, 1)]",
    "import contextlib\nwhile True:\n    with contextlib.suppress(BaseException):\n"
    "        while True:\n            pass",
    "import asyncio\nasync def spin():\n    while True:\n        await asyncio.sleep(0)\n"
    "asyncio.run(spin())",
])
def test_loops_in_c_and_swallowed_stops_still_end_at_the_deadline(restricted, host, code):
    started = time.monotonic()
    outcome = run(restricted, host, code, wall_clock_s=0.5)
    assert isinstance(outcome.error, TimeLimitExceeded)
    assert time.monotonic() - started < 4 * 0.5 + 1.0     # a margin for a loaded machine


def test_cancel_stops_a_running_program(restricted, host):
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    outcome = run(restricted, host, "while True:\n    pass", cancel=cancel, wall_clock_s=30.0)
    assert isinstance(outcome.error, RunAborted)
    assert outcome.status == "error"
    assert time.monotonic() - started < 5.0            # far from the 30 s wall clock


def test_a_failing_dispatcher_is_host_dispatch_failed(restricted):
    def broken(batch):
        raise RuntimeError("pipeline down")

    outcome = run(restricted, broken, "try:\n    echo(value=1)\nexcept BaseException:\n"
                                      "    pass\n'ignored'", tools=[echo_tool()])
    assert isinstance(outcome.error, HostDispatchFailed)
    assert outcome.error.message == "the dispatcher raised RuntimeError: pipeline down"


def test_runs_on_concurrent_threads_keep_their_own_output(restricted):
    results = {}

    def one(i):
        results[i] = run(restricted, EchoHost(), f"for _ in range(3):\n    print({i})\n{i}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {i: (o.stdout, o.value) for i, o in results.items()} == {
        i: (f"{i}\n" * 3, i) for i in range(4)}


@pytest.mark.slow
def test_deeply_nested_c_iterators_do_not_overflow_the_native_stack(restricted, host):
    # 600,000 levels overflow a default 8 MiB thread stack: the whole process would crash.
    code = ("import itertools\nit = iter([7])\nfor _ in range(600_000):\n"
            "    it = itertools.chain(it)\nnext(it)")
    outcome = run(restricted, host, code, wall_clock_s=60.0)
    assert (outcome.status, outcome.value) == ("ok", 7)
