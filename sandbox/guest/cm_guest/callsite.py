"""Does a tool call in async code want a value or an awaitable? Decided per call site.

In synchronous code a tool call returns its value. In async code the same call may be
meant either way: `await get(x)` and `asyncio.gather(get(a), get(b))` want an awaitable
(so calls can be batched and overlap), while `return get(x)` or `r = get(x); r["k"]` in
a coroutine want the value, as they would with plain functions. The program's AST is
read once, before it runs: a call expression wants an awaitable when it

1. is the operand of `await`;
2. is an argument of an asyncio scheduling call (`gather`, `create_task`, `ensure_future`,
   `wait_for`, `wait`, `shield`, `as_completed`, `run`, `run_until_complete`), directly or
   as an element of a display, comprehension or starred argument there (a call nested in
   another call's arguments is not: its value goes to that call);
3. is assigned (directly or as such an element) to a name, or appended to a list named,
   that the same scope awaits or hands to such a call in the same way.

At run time the binding finds its call site from the calling frame's current instruction
position. A call site the analysis does not know (code built at run time) gets an
awaitable inside a running loop.
"""

import ast

PROGRAM_FILENAME = "<program>"

_SCHEDULERS = frozenset({"gather", "create_task", "ensure_future", "wait_for", "wait",
                         "shield", "as_completed", "run", "run_until_complete"})
_COLLECTORS = frozenset({"append", "extend", "add", "insert", "appendleft"})
_SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)



def _callee_name(call):
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


class CallSites:
    """Per program: whether each call expression wants an awaitable."""

    def __init__(self, sites):
        self._sites = sites          # (lineno, end_lineno, col, end_col) -> bool
        self._positions = {}         # code object -> positions, one per code unit

    def wants_awaitable(self, frame):
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


def _element_step(child, up):
    """True when `child` sits in an element position of `up`: its value becomes (part of)
    up's value unchanged, so whoever consumes `up` consumes `child`."""
    if isinstance(up, (ast.Starred, ast.List, ast.Tuple, ast.Set, ast.keyword)):
        return True
    if isinstance(up, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        return child is up.elt
    if isinstance(up, ast.DictComp):
        return child is up.value
    if isinstance(up, ast.Dict):
        return any(child is v for v in up.values)
    return False


def analyse(tree):
    """The CallSites of a parsed program (before any rewriting of its tree)."""
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node

    def climb(node):
        """(the nearest ancestor that is not an element position, the node beneath it)"""
        child, up = node, parents.get(node)
        while up is not None and _element_step(child, up):
            child, up = up, parents.get(up)
        return up, child

    def scope_of(node):
        up = parents.get(node)
        while up is not None and not isinstance(up, _SCOPES):
            up = parents.get(up)
        return up

    def awaited_or_scheduled(node):
        up, child = climb(node)
        if isinstance(up, ast.Await):
            return True
        return (isinstance(up, ast.Call) and child is not up.func
                and _callee_name(up) in _SCHEDULERS)

    consumed = {}            # scope -> names awaited or handed to a scheduler
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
                and awaited_or_scheduled(node):
            consumed.setdefault(scope_of(node), set()).add(node.id)

    def flows_into_consumed_name(node):
        names = consumed.get(scope_of(node), ())
        if not names:
            return False
        up, child = climb(node)
        if isinstance(up, (ast.Assign, ast.AnnAssign)) and child is up.value:
            targets = up.targets if isinstance(up, ast.Assign) else [up.target]
            return any(isinstance(t, ast.Name) and t.id in names for t in targets)
        if isinstance(up, ast.Call) and child is not up.func \
                and isinstance(up.func, ast.Attribute) and up.func.attr in _COLLECTORS \
                and isinstance(up.func.value, ast.Name):
            return up.func.value.id in names
        return False

    sites = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            key = (node.lineno, node.end_lineno, node.col_offset, node.end_col_offset)
            sites[key] = awaited_or_scheduled(node) or flows_into_consumed_name(node)
    return CallSites(sites)
