"""In async code, which tool calls return the plain value? Decided per call site.

In async code a tool call returns a `PendingCall` (`pending.py`): awaitable, and its value
wherever it is used as one. That works whatever route the call takes to asyncio. It is
still not the value itself (`is None`, `type()`, C functions that demand a `str`), so a
call site whose result provably never reaches asyncio returns the plain value instead.

The program's AST is read once, before it runs. A call site returns the plain value when
its result (or a container holding it) only ever meets uses that cannot hand it on:

- a statement of its own; an operand (`+`, `==`, `not`, `in`); a test (`if`, `while`,
  `assert`); an f-string; iteration or unpacking of the value itself; `x.attr`, `x[k]`;
- an argument of a builtin or library function, a tool, or a method that does not store
  it (`print`, `len`, `isinstance`, `json.dumps`, `", ".join`, `text.split`); functions that
  return what they were given (`list`, `sorted`, `max`, `map`, `zip`, a library function)
  pass a container of calls on to their own result's uses;
- assignment to a name, an attribute or an item, or `append`/`add`/`extend`/... into a
  container, when every use of that name (or container) anywhere in the program is one of
  these; `return` from a function, when every call of that function is (for a coroutine:
  every `await f(...)` or `asyncio.run(f(...))` of it).

Everything else may reach asyncio and returns a `PendingCall`: `await`, any `asyncio.*`
call or scheduler method (`create_task`, `gather`, ...), an argument of a function or
method the program defines, a lambda's return value, the return value of a coroutine that
is handed to asyncio, `yield`, and anything the analysis does not follow. Sync code (no
running event loop) always gets the value.

A program that may never run an event loop is not analysed at all (`may_run_a_loop`): a
loop runs only through asyncio, which a program names to import it, or top-level `await`.
(One that imports asyncio under a name it builds at run time gets no analysis, so in its
loop every call returns a `PendingCall`, the answer for a site the analysis does not know.)

At run time the binding finds its call site from the calling frame's current instruction
position; a position the analysis does not know (code built at run time, a binding called
from C, as in `map(tool, xs)`) returns a `PendingCall` inside a running loop.
"""

import ast
import builtins

PROGRAM_FILENAME = "<program>"

_SCHEDULERS = frozenset({"gather", "create_task", "ensure_future", "wait_for", "wait",
                         "shield", "as_completed", "run", "run_until_complete",
                         "run_coroutine_threadsafe", "call_soon", "call_later", "call_at"})
_STORE_METHODS = frozenset({"append", "appendleft", "insert", "add", "setdefault", "put",
                            "put_nowait", "set_result", "push"})
_MERGE_METHODS = frozenset({"extend", "extendleft", "update"})
# Builtins whose result holds (some of) their arguments, or is one of them.
_PASSING_BUILTINS = frozenset({"list", "tuple", "set", "frozenset", "dict", "sorted",
                               "reversed", "iter", "next", "min", "max", "enumerate", "zip",
                               "map", "filter", "getattr", "vars"})
# Modules whose functions return new values computed from their arguments, never the
# arguments themselves (unlike `copy`, `itertools`, `random.choice`, `statistics.median`).
_CONSUMING_MODULES = frozenset("""
    base64 binascii datetime hashlib html json math re string struct textwrap time
    unicodedata urllib uuid zlib
""".split())
_BUILTIN_NAMES = frozenset(dir(builtins))
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
# Parents that use a value without handing it on (an `IfExp` only reaches here as its test;
# t-strings exist from Python 3.14, which the guest runs).
_CONSUMING = tuple(getattr(ast, name) for name in """
    Expr UnaryOp Compare FormattedValue JoinedStr Interpolation TemplateStr If While Assert
    IfExp Slice Delete Match match_case withitem Raise
""".split() if hasattr(ast, name))
_MAX_DEPTH = 60          # deeper chains of names and calls count as reaching asyncio
_MAX_STEPS = 50_000      # analysis work per program; past it, every site is pending


class CallSites:
    """Per program: whether each call expression returns a `PendingCall` in async code."""

    def __init__(self, sites):
        self._sites = sites          # (lineno, end_lineno, col, end_col) -> bool
        self._positions = {}         # code object -> positions, one per code unit

    def returns_pending(self, frame):
        """For a call made from `frame` (or, walking out, the nearest frame of the
        program's own code): True/False from the analysis, None for an unknown site."""
        while frame is not None and frame.f_code.co_filename != PROGRAM_FILENAME:
            frame = frame.f_back
        if frame is None:
            return None
        code = frame.f_code
        positions = self._positions.get(code)
        if positions is None:
            positions = self._positions[code] = list(code.co_positions())
        index = frame.f_lasti // 2
        if not 0 <= index < len(positions):
            return None
        return self._sites.get(positions[index])


class _Budget(Exception):
    """The analysis ran past `_MAX_STEPS`."""


class _Flow:
    """Where the value of an expression can go, over the whole program.

    `reaches(node, contained)`: may the object `node` evaluates to reach asyncio? With
    `contained`, the object holds the call somewhere inside (a list of calls, an object with
    a call in an attribute) rather than being it; that answer is never False where the
    direct one is True, so it is also the safe one when the depth is unknown.
    """

    def __init__(self, tree):
        self.parents = {}
        self.loads = {}              # name -> its Name(Load) nodes, anywhere
        self.bound = set()           # names the program binds itself
        self.modules = {}            # name bound by an import -> the module it came from
        self.defs = {}               # function name -> its def nodes
        self.calls = []              # every Call node
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            if isinstance(node, ast.Call):
                self.calls.append(node)
            elif isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Load):
                    self.loads.setdefault(node.id, []).append(node)
                else:
                    self.bound.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.bound.add(node.name)
                if not isinstance(node, ast.ClassDef):
                    self.defs.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    name = alias.asname or alias.name.partition(".")[0]
                    origin = node.module if isinstance(node, ast.ImportFrom) else alias.name
                    self.modules[name] = (origin or "").partition(".")[0]
            elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
                if node.name:
                    self.bound.add(node.name)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                self.bound.add(node.rest)
        self._memo = {}
        self._active = set()
        self._assumed = False        # a cycle was cut (answer False) under the current key
        self._steps = 0

    # ---- per call site --------------------------------------------------------------------

    def pending(self, call):
        """Should this call site return a PendingCall in async code?"""
        try:
            if self.reaches(call, False, 0):
                return True
            # A binding invoked from C inside this call (`list(map(tool, xs))`): its result
            # is held by this call's result.
            return not self._is_tool_call(call) and self.reaches(call, True, 0)
        except _Budget:
            return True

    def _is_tool_call(self, call):
        func = call.func
        if isinstance(func, ast.Name):
            return func.id not in self.bound and func.id not in self.modules \
                and func.id not in _BUILTIN_NAMES
        return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id == "tools" and "tools" not in self.bound)

    # ---- the walk -------------------------------------------------------------------------

    def reaches(self, node, contained, depth):
        return self._cached((node, contained), self._reaches, node, contained, depth)

    def name_reaches(self, name, contained, depth):
        return self._cached((name, contained), self._name_reaches, name, contained, depth)

    def _cached(self, key, compute, subject, contained, depth):
        """`compute(subject, contained, depth + 1)`, memoized; a cycle counts as False (the
        other paths decide), and an answer that leaned on such a cut is not kept."""
        if key in self._memo:
            return self._memo[key]
        if depth > _MAX_DEPTH:
            return True
        if key in self._active:
            self._assumed = True
            return False
        self._steps += 1
        if self._steps > _MAX_STEPS:
            raise _Budget
        self._active.add(key)
        outer, self._assumed = self._assumed, False
        try:
            result = compute(subject, contained, depth + 1)
        finally:
            self._active.discard(key)
        if result or not self._assumed:
            self._memo[key] = result
        self._assumed = self._assumed or outer
        return result

    def _name_reaches(self, name, contained, depth):
        if name in self.modules:
            return True
        return any(self.reaches(load, contained, depth) for load in self.loads.get(name, ()))

    def holder_reaches(self, target, depth):
        """A call stored into `target` (`x`, `x.attr`, `x[k]`, `x.a.b[k]`): where can the
        object `x` go?"""
        while isinstance(target, (ast.Attribute, ast.Subscript, ast.Starred)):
            target = target.value
        if isinstance(target, ast.Name):
            return self.name_reaches(target.id, True, depth)
        if isinstance(target, (ast.Tuple, ast.List)):
            return any(self.holder_reaches(t, depth) for t in target.elts)
        return True

    def _reaches(self, node, contained, depth):
        up = self.parents.get(node)
        if isinstance(up, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            return self.reaches(up, True, depth)
        if isinstance(up, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            # the element (or key/value): the comprehension holds it; a generator's
            # `ifs` are tests and its `iter` is handled at `comprehension`
            return self.reaches(up, True, depth)
        if isinstance(up, ast.comprehension):
            if node is up.iter:
                return contained and self.holder_reaches(up.target, depth)
            return False
        if isinstance(up, ast.Starred):
            if not contained:
                return False         # unpacking a plain value gives plain parts
            call = self.parents.get(up)
            if isinstance(call, ast.Call):      # `f(*calls)`: each element is an argument
                return self.arg_reaches(call, up, True, None, depth)
            return self.reaches(up, True, depth)
        if isinstance(up, (ast.BoolOp, ast.NamedExpr)) or (
                isinstance(up, ast.IfExp) and node is not up.test):
            through = self.reaches(up, contained, depth)
            if isinstance(up, ast.NamedExpr):
                through = through or self.name_reaches(up.target.id, contained, depth)
            return through
        if isinstance(up, (ast.Await, ast.Yield, ast.YieldFrom, ast.Lambda)):
            return True
        if isinstance(up, ast.Return):
            return self.return_reaches(up, contained, depth)
        if isinstance(up, (ast.Assign, ast.AnnAssign)):
            if node is not up.value:
                return False         # a key or index in a target
            targets = up.targets if isinstance(up, ast.Assign) else [up.target]
            return any(self.store_reaches(t, contained, depth) for t in targets)
        if isinstance(up, ast.AugAssign):
            return node is up.value and contained and self.holder_reaches(up.target, depth)
        if isinstance(up, (ast.Attribute, ast.Subscript)):
            return node is up.value and contained and self.reaches(up, True, depth)
        if isinstance(up, ast.Call):
            if node is up.func:
                return contained and self.reaches(up, True, depth)
            return self.arg_reaches(up, node, contained, None, depth)
        if isinstance(up, ast.keyword):
            call = self.parents.get(up)
            if not isinstance(call, ast.Call):
                return True                             # a class keyword
            return self.arg_reaches(call, node, contained, up.arg, depth)
        if isinstance(up, ast.BinOp):
            return contained and self.reaches(up, True, depth)
        if isinstance(up, (ast.For, ast.AsyncFor)):
            return node is up.iter and contained and self.holder_reaches(up.target, depth)
        return not isinstance(up, _CONSUMING)  # anything not followed: assume it may

    def store_reaches(self, target, contained, depth):
        if isinstance(target, ast.Name):
            return self.name_reaches(target.id, contained, depth)
        if isinstance(target, (ast.Tuple, ast.List)):
            # unpacking a plain value gives plain parts; a tuple of calls is followed per name
            return contained and any(self.store_reaches(t, True, depth) for t in target.elts)
        if isinstance(target, ast.Starred):
            return self.store_reaches(target.value, True, depth)
        return self.holder_reaches(target, depth)

    def arg_reaches(self, call, arg, contained, keyword, depth):
        """`arg` is passed to `call` (positionally, starred, or as `keyword=`)."""
        func = call.func
        if isinstance(func, ast.Name):
            name = func.id
            if name in self.modules:                    # from m import f
                return self.module_arg_reaches(self.modules[name], call, contained, depth)
            if name in self.bound:
                return True                             # the program's own function
            if name == "setattr":
                return self.holder_reaches(call.args[0], depth) if call.args else True
            if name in _PASSING_BUILTINS:
                return (contained or keyword is not None) and self.reaches(call, True, depth)
            return False                                # a builtin or a tool: consumed
        if isinstance(func, ast.Attribute):
            base = func.value
            if isinstance(base, ast.Name) and base.id in self.modules:
                return self.module_arg_reaches(self.modules[base.id], call, contained, depth)
            if isinstance(base, ast.Name) and base.id == "tools" and "tools" not in self.bound:
                return False                            # tools.<alias>(...)
            attr = func.attr
            if attr in _SCHEDULERS or attr in self.defs:
                return True
            if attr in _STORE_METHODS:
                return self.holder_reaches(base, depth)
            if attr in _MERGE_METHODS:
                return (contained or keyword is not None) and self.holder_reaches(base, depth)
            if isinstance(base, ast.Constant):
                return False                            # ", ".join(...), "{}".format(...)
            return contained and self.reaches(call, True, depth)
        return True

    def module_arg_reaches(self, module, call, contained, depth):
        if module == "asyncio":
            return True
        if module in _CONSUMING_MODULES:
            return False
        return contained and self.reaches(call, True, depth)

    def return_reaches(self, ret, contained, depth):
        """The value of `return` goes wherever the calls of its function go: for a plain
        function, the call's own uses; for a coroutine, those of `await f(...)` or
        `asyncio.run(f(...))` (a coroutine handed to anything else may reach asyncio)."""
        fn = self.parents.get(ret)
        while fn is not None and not isinstance(fn, (*_FUNCTIONS, ast.ClassDef, ast.Module)):
            fn = self.parents.get(fn)
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.decorator_list \
                or isinstance(self.parents.get(fn), ast.ClassDef) or self._is_generator(fn) \
                or len(self.defs.get(fn.name, ())) != 1:
            return True
        for load in self.loads.get(fn.name, ()):
            call = self.parents.get(load)
            if not (isinstance(call, ast.Call) and call.func is load):
                return True                             # the function itself is handed on
            if isinstance(fn, ast.AsyncFunctionDef):
                call = self._result_of_coroutine(call)
                if call is None:
                    return True
            if self.reaches(call, contained, depth):
                return True
        return False

    def _result_of_coroutine(self, call):
        """The expression whose value is the coroutine `call`'s result, or None."""
        up = self.parents.get(call)
        if isinstance(up, ast.Await):
            return up
        if isinstance(up, ast.Call) and len(up.args) == 1 and up.args[0] is call \
                and not up.keywords:
            func = up.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                    and self.modules.get(func.value.id) == "asyncio" and func.attr == "run":
                return up
            if isinstance(func, ast.Name) and func.id == "run" \
                    and self.modules.get("run") == "asyncio":
                return up
        return None

    def _is_generator(self, fn):
        stack = list(fn.body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.Yield, ast.YieldFrom)):
                return True
            if not isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
                stack.extend(ast.iter_child_nodes(node))
        return False


def may_run_a_loop(source):
    """Whether the program's text names asyncio or awaits: without either it cannot start
    an event loop, so no call of it ever needs the analysis."""
    return "asyncio" in source or "await" in source


def analyse(tree):
    """The CallSites of a parsed program (before any rewriting of its tree)."""
    flow = _Flow(tree)
    sites = {}
    for node in flow.calls:
        key = (node.lineno, node.end_lineno, node.col_offset, node.end_col_offset)
        sites[key] = flow.pending(node) or sites.get(key, False)
    return CallSites(sites)
