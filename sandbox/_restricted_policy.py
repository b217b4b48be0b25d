"""The restricted tier's compile step: RestrictedPython's policy as this tier extends it,
and the attribute-name rule it shares with the run-time guards.

`_compile` turns a program into a code object, or into a `SyntaxError` naming the rule it
broke: RestrictedPython's checks and rewrites (`_Policy`: async syntax, annotated
assignments, size-guarded `+ * ** <<`, `_tick_()` limit checks), then the guest's
final-expression rule. `_check_attr_name` is the same rule at run time, for every read the
rewrite turns into a `_getattr_` call and every name that arrives as a string (`getattr`,
`operator.attrgetter`); the few underscored names a program may read where the object
allows it (`_CONTEXT_ATTRS`) compile into `_getattr_` calls and are decided there. The
tier's lowest layer: it knows nothing of a run.
"""

from __future__ import annotations

import ast
import types
from typing import Any, ClassVar

from RestrictedPython.transformer import (
    INSPECT_ATTRIBUTES,
    RestrictingNodeTransformer,
    copy_locations,
)

from .guest.cm_guest import callsite, runtime, settling

PROGRAM = runtime.PROGRAM_FILENAME


# ---- attribute names -------------------------------------------------------------------

# Names starting with "_" that compile, each readable only where named here: `__name__`
# when it is a str, `super().__init__` in a class the program defined, an exception's
# chaining attributes, a namedtuple's API.
_NAMEDTUPLE_ATTRS = frozenset({"_asdict", "_replace", "_fields", "_make", "_field_defaults"})
_EXCEPTION_ATTRS = frozenset({"__cause__", "__context__", "__suppress_context__"})
_CONTEXT_ATTRS = _NAMEDTUPLE_ATTRS | _EXCEPTION_ATTRS | {"__init__", "__name__"}


# Attributes that change or read state of the whole interpreter when the object is not the
# program's own: `register` of an ABC (its registry and the global ABC cache token), and the
# counters and cache of a library function under `functools.lru_cache`. The guards decide
# them against the object (`_restricted_guards._shared_state`); where only a name is known
# (`operator.attrgetter`, `operator.methodcaller`) they are refused outright.
STATEFUL_ATTRS = frozenset({"register", "cache_info", "cache_clear", "cache_parameters"})


def _context_allows(name: str, target: Any, owned: set[type] | None) -> bool:
    if name == "__name__":
        return True                   # `_getattr_` hands it out only if it is a str
    if name in _EXCEPTION_ATTRS:
        return isinstance(target, BaseException)
    if name == "__init__":
        return (owned is not None and type(target) is super
                and getattr(target, "__thisclass__", None) in owned)
    cls = target if isinstance(target, type) else type(target)
    return issubclass(cls, tuple) and any(
        "_fields" in vars(base) for base in cls.__mro__ if base is not tuple)


def _check_attr_name(name: Any, target: Any = None, owned: set[type] | None = None) -> str:
    """The rule every attribute read follows: `RestrictedPython.Guards.safer_getattr`'s,
    with no `default` pass-through, plus the context-bound names of `_CONTEXT_ATTRS`."""
    if type(name) is not str:
        raise TypeError("attribute name must be a str")
    if name in _CONTEXT_ATTRS and _context_allows(name, target, owned):
        return name
    if name.startswith("_"):
        raise AttributeError(f'"{name}" is an invalid attribute name because it starts '
                             'with "_"')
    if name in INSPECT_ATTRIBUTES:
        raise AttributeError(f'"{name}" is a restricted name, that is forbidden to access '
                             'in the sandbox')
    if name in ("format", "format_map") and (
            isinstance(target, str) or (isinstance(target, type) and issubclass(target, str))):
        raise NotImplementedError("Using the format*() methods of `str` is not safe")
    return name


# ---- compile ---------------------------------------------------------------------------

class _Policy(RestrictingNodeTransformer):
    """RestrictedPython's policy, plus: async syntax (checked like its sync forms),
    annotated assignments, size-guarded `+ * ** <<`, and a `_tick_()` limit check at the
    start of every loop body, function body, exception handler and `finally` block and in
    every comprehension."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.first_error: tuple[int, int, str] | None = None

    def error(self, node: ast.AST, info: str) -> None:
        if self.first_error is None:
            self.first_error = (getattr(node, "lineno", 1) or 1,
                                getattr(node, "col_offset", 0) or 0, info)
        super().error(node, info)

    @staticmethod
    def _tick(anchor: ast.AST) -> ast.Expr:
        call = ast.Call(func=ast.Name("_tick_", ast.Load()), args=[], keywords=[])
        stmt = ast.Expr(value=call)
        copy_locations(stmt, anchor)  # type: ignore[arg-type]
        copy_locations(call, anchor)  # type: ignore[arg-type]
        return stmt

    def _ticked(self, node: Any) -> Any:
        if node is not None:
            node.body.insert(0, self._tick(node))
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        if node.name == "__del__":
            self.error(node, '"__del__" is an invalid method name in the sandbox.')
        return self._ticked(super().visit_FunctionDef(node))

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> Any:
        self.check_name(node, node.name, allow_magic_methods=True)
        self.check_function_argument_names(node)
        with self.print_info.new_print_scope():
            node = self.node_contents_visit(node)
            self.inject_print_collector(node)  # type: ignore[arg-type]
        return self._ticked(node)

    def visit_Await(self, node: ast.Await) -> Any:
        return self.node_contents_visit(node)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> Any:
        return self._ticked(self.node_contents_visit(node))

    def visit_AsyncWith(self, node: ast.AsyncWith) -> Any:
        return self.visit_With(node)  # type: ignore[arg-type]

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        if node.attr in _CONTEXT_ATTRS and isinstance(node.ctx, ast.Load):
            # Checked at run time by `_getattr_` against the object (see _CONTEXT_ATTRS).
            value = self.visit(node.value)
            call = ast.Call(func=ast.Name("_getattr_", ast.Load()),
                            args=[value, ast.Constant(node.attr)], keywords=[])
            copy_locations(call, node)
            return call
        return super().visit_Attribute(node)

    def visit_Name(self, node: ast.Name) -> Any:
        if node.id == "__name__" and isinstance(node.ctx, ast.Load):
            return node               # `if __name__ == "__main__":` reads a plain str
        return super().visit_Name(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        return self.node_contents_visit(node)

    def visit_For(self, node: ast.For) -> Any:
        return self._ticked(super().visit_For(node))

    def visit_While(self, node: ast.While) -> Any:
        return self._ticked(super().visit_While(node))

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> Any:
        return self._ticked(super().visit_ExceptHandler(node))

    def visit_Try(self, node: Any) -> Any:
        node = super().visit_Try(node)
        if node.finalbody:
            node.finalbody.insert(0, self._tick(node.finalbody[0]))
        return node

    def visit_comprehension(self, node: Any) -> Any:
        node = super().visit_comprehension(node)
        node.ifs.append(self._tick(node.target).value)
        return node

    _GUARDED_OPS: ClassVar[dict[type[ast.operator], str]] = {
        ast.Add: "_add_", ast.Mult: "_mul_", ast.Pow: "_pow_", ast.LShift: "_lshift_"}

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        node = self.node_contents_visit(node)
        guard = self._GUARDED_OPS.get(type(node.op))
        if guard is None:
            return node
        call = ast.Call(func=ast.Name(guard, ast.Load()), args=[node.left, node.right],
                        keywords=[])
        copy_locations(call, node)
        return call


def _compile(source: str) -> tuple[types.CodeType, bool, Any]:
    """RestrictedPython's checks and rewrites, then the guest's final-expression rule, then
    `compile` with top-level await allowed (`compile_restricted` drops compile flags, so the
    policy is applied here the way `compile_restricted_exec` applies it). Identity tests and
    `type(x)` wait for a pending call, as in the wasm tier (`cm_guest/settling.py`)."""
    tree = ast.parse(source, PROGRAM, "exec")
    sites = callsite.analyse(tree)            # before the policy rewrites the tree
    has_value = bool(tree.body) and isinstance(tree.body[-1], ast.Expr)
    errors: list[str] = []
    policy = _Policy(errors, [], {})
    tree = policy.visit(tree)
    if errors:
        lineno, col, info = policy.first_error or (1, 0, errors[0])
        lines = source.splitlines()
        text = lines[lineno - 1] if 0 < lineno <= len(lines) else None
        raise SyntaxError(info, (PROGRAM, lineno, col + 1, text))
    if callsite.may_run_a_loop(source):     # after the policy: its name is the tier's own
        settling.settle_identity(tree)
    if has_value:
        last = tree.body[-1]
        tree.body[-1] = ast.copy_location(
            ast.Assign(targets=[ast.Name(runtime.VALUE_SLOT, ast.Store())], value=last.value),
            last)
    ast.fix_missing_locations(tree)
    code = compile(tree, PROGRAM, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
                   dont_inherit=True)
    return code, has_value, sites
