"""Generated variants of corpus cases: technique-preserving rewrites of each program's AST
(`codemode eval --variants N [--seed S]`; fixtures/attacks/README.md, "Generated variants").

Escapes reported against sandboxes are mostly a known technique reached another way: the
same attribute through `getattr` and a built string, through `vars`, from inside a
comprehension or an exception handler, from code compiled at run time. Each rewrite below
keeps what a program does and changes how it does it:

    getattr          `obj.name` (read) -> `getattr(obj, 'name')`
    runtime-names    `obj._name` and `obj.__name__` -> `getattr(obj, ''.join([...]))`, the
                     name built from pieces at run time
    vars             `module.name` -> `vars(module)['name']` (names bound by `import`)
    dict             `module.name` -> `module.__dict__['name']`
    hex-strings      string constants -> `bytes.fromhex('...').decode()`
    char-codes       string constants -> `''.join(map(chr, [...]))`
    comprehension    each expression statement and assigned value -> `[v for cm_i in [0]][0]`
    lambda           ... -> `(lambda: v)()`
    generator        ... -> `next((v for cm_i in [0]))`
    class-body       each discarded expression statement -> the body of a new class
    except-handler   each simple statement -> run inside an `except` handler
    format-spec      each discarded expression statement -> evaluated in an f-string's
                     format spec
    eval-string      each discarded module-level expression statement ->
                     `eval(compile(<its source, built from pieces>, ...))`
    exec-string      the whole module (but a final expression) -> `exec(compile(...))` of its
                     source built from pieces at run time
    async            the whole module -> the body of an `async def` run by `asyncio.run`,
                     its names declared `global`

Strings holding a placeholder (`@@NAME@@`) are never encoded or split: the evaluator
substitutes placeholders in the program text. New names have no leading underscore (the
restricted tier refuses those at compile time, which would hide the technique).

A variant keeps its parent's category, oracles, expected error and labels; its id is
`PARENT--REWRITE` and its header names the rewrite and the seed. `generate` is
deterministic: the same cases, number and seed give the same variants (each case draws
from `random.Random(f"{seed}:{id}")`). A rewrite that finds nothing to change, or whose
result does not compile, gives no variant.
"""

from __future__ import annotations

import ast
import copy
import random
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ._corpus import PHASE_SPLIT, Case

_D = TypeVar("_D", ast.ClassDef, ast.AsyncFunctionDef)

PHASE_MARKER = "# ---- phase 2 (fresh sandbox, same host) ----"


def _plain(node: _D) -> _D:
    """`node` with no type parameters (the field exists from Python 3.12 on)."""
    if sys.version_info >= (3, 12):
        setattr(node, "type_params", [])  # noqa: B010  (absent from 3.11's stubs)
    return node
_HOLE = "@@"

Rewrite = Callable[[ast.Module, random.Random], bool]
"""Rewrites the module in place; False when it found nothing to change."""


# ---- helpers -----------------------------------------------------------------------------

def _call(func: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Name(func, ast.Load()), args=list(args), keywords=[])


def _pieces(text: str, rng: random.Random) -> ast.expr:
    """`''.join([...])` of `text` cut at one to three random places (not inside a
    placeholder, which must stay whole)."""
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 3))))
    cuts = [c for c in cuts if not _inside_hole(text, c)]
    parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    return ast.Call(func=ast.Attribute(ast.Constant(""), "join", ast.Load()),
                    args=[ast.List([ast.Constant(p) for p in parts], ast.Load())], keywords=[])


def _inside_hole(text: str, cut: int) -> bool:
    start = 0
    while (i := text.find(_HOLE, start)) != -1:
        j = text.find(_HOLE, i + 2)
        if j == -1:
            return False
        if i < cut < j + 2:
            return True
        start = j + 2
    return False


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _in_fstring(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.JoinedStr):
            return True
    return False


def _has(node: ast.AST, *kinds: type[ast.AST]) -> bool:
    return any(isinstance(n, kinds) for n in ast.walk(node))


_SCOPE_BREAKERS = (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)


def _bodies(tree: ast.Module) -> Iterable[list[ast.stmt]]:
    """Statement lists of the module and of its functions (not class bodies: a wrapper's
    own scope cannot see a class body's names), including nested blocks."""
    stack: list[tuple[ast.AST, bool]] = [(tree, True)]
    while stack:
        node, usable = stack.pop()
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if usable and isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                stack.append((child, False))
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                stack.append((child, True))
            elif isinstance(child, ast.stmt | ast.excepthandler | ast.match_case):
                stack.append((child, usable))


def _final_expr(tree: ast.Module) -> ast.stmt | None:
    return tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None


# ---- attribute indirection ---------------------------------------------------------------

class _Getattr(ast.NodeTransformer):
    def __init__(self, rng: random.Random, *, built: bool) -> None:
        self.rng = rng
        self.built = built
        self.changed = False

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load):
            return node
        if self.built and not node.attr.startswith("_") and self.rng.random() < 0.7:
            return node
        name: ast.expr = (_pieces(node.attr, self.rng) if self.built and len(node.attr) > 1
                          else ast.Constant(node.attr))
        self.changed = True
        return ast.copy_location(_call("getattr", node.value, name), node)


def _getattr(tree: ast.Module, rng: random.Random) -> bool:
    t = _Getattr(rng, built=False)
    t.visit(tree)
    return t.changed


def _runtime_names(tree: ast.Module, rng: random.Random) -> bool:
    t = _Getattr(rng, built=True)
    t.visit(tree)
    return t.changed


def _module_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
    return names


class _ModuleLookup(ast.NodeTransformer):
    def __init__(self, modules: set[str], via_dict: bool) -> None:
        self.modules = modules
        self.via_dict = via_dict
        self.changed = False

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if not (isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name)
                and node.value.id in self.modules):
            return node
        mapping: ast.expr = (ast.Attribute(node.value, "__dict__", ast.Load()) if self.via_dict
                             else _call("vars", node.value))
        self.changed = True
        return ast.copy_location(ast.Subscript(mapping, ast.Constant(node.attr), ast.Load()),
                                 node)


def _vars(tree: ast.Module, rng: random.Random) -> bool:
    t = _ModuleLookup(_module_names(tree), via_dict=False)
    t.visit(tree)
    return t.changed


def _dict(tree: ast.Module, rng: random.Random) -> bool:
    t = _ModuleLookup(_module_names(tree), via_dict=True)
    t.visit(tree)
    return t.changed


# ---- encodings ---------------------------------------------------------------------------

class _Strings(ast.NodeTransformer):
    def __init__(self, tree: ast.Module, encode: Callable[[str], ast.expr]) -> None:
        self.parents = _parents(tree)
        self.encode = encode
        self.changed = False

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        value = node.value
        if not isinstance(value, str) or len(value) < 2 or _HOLE in value \
                or _in_fstring(node, self.parents) or self._pattern(node):
            return node
        self.changed = True
        return ast.copy_location(self.encode(value), node)

    def _pattern(self, node: ast.AST) -> bool:
        parent = self.parents.get(node)
        return isinstance(parent, ast.MatchValue | ast.MatchSingleton | ast.ImportFrom)


def _hex_strings(tree: ast.Module, rng: random.Random) -> bool:
    def encode(text: str) -> ast.expr:
        data = text.encode("utf-8", "surrogatepass").hex()
        fromhex = ast.Attribute(ast.Name("bytes", ast.Load()), "fromhex", ast.Load())
        decoded = ast.Call(fromhex, [ast.Constant(data)], [])
        return ast.Call(ast.Attribute(decoded, "decode", ast.Load()),
                        [ast.Constant("utf-8"), ast.Constant("surrogatepass")], [])
    t = _Strings(tree, encode)
    t.visit(tree)
    return t.changed


def _char_codes(tree: ast.Module, rng: random.Random) -> bool:
    def encode(text: str) -> ast.expr:
        codes = ast.List([ast.Constant(ord(c)) for c in text], ast.Load())
        return ast.Call(ast.Attribute(ast.Constant(""), "join", ast.Load()),
                        [_call("map", ast.Name("chr", ast.Load()), codes)], [])
    t = _Strings(tree, encode)
    t.visit(tree)
    return t.changed


# ---- the payload moved into another construct --------------------------------------------

def _wrap_values(tree: ast.Module, wrap: Callable[[ast.expr], ast.expr]) -> bool:
    """Replace the value of each expression statement and assignment (in the module and in
    functions) by `wrap(value)`; values with await/yield/walrus keep their scope."""
    changed = False
    for body in list(_bodies(tree)):
        for stmt in body:
            if isinstance(stmt, ast.Expr | ast.Assign | ast.AnnAssign | ast.AugAssign) \
                    and stmt.value is not None and not _has(stmt.value, *_SCOPE_BREAKERS) \
                    and not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
                stmt.value = ast.copy_location(wrap(stmt.value), stmt.value)
                changed = True
    return changed


def _one_shot() -> list[ast.comprehension]:
    return [ast.comprehension(target=ast.Name("cm_i", ast.Store()),
                              iter=ast.List([ast.Constant(0)], ast.Load()), ifs=[], is_async=0)]


def _comprehension(tree: ast.Module, rng: random.Random) -> bool:
    return _wrap_values(tree, lambda v: ast.Subscript(
        ast.ListComp(v, _one_shot()), ast.Constant(0), ast.Load()))


def _lambda(tree: ast.Module, rng: random.Random) -> bool:
    empty = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
    return _wrap_values(tree, lambda v: ast.Call(ast.Lambda(empty, v), [], []))


def _generator(tree: ast.Module, rng: random.Random) -> bool:
    return _wrap_values(tree, lambda v: _call("next", ast.GeneratorExp(v, _one_shot())))


def _discarded(tree: ast.Module) -> Iterable[tuple[list[ast.stmt], int]]:
    """(body, index) of expression statements whose value nobody uses: not the module's
    final expression (the run's value), not constants (docstrings), no await/yield."""
    final = _final_expr(tree)
    for body in _bodies(tree):
        for index, stmt in enumerate(body):
            if isinstance(stmt, ast.Expr) and stmt is not final \
                    and not isinstance(stmt.value, ast.Constant) \
                    and not _has(stmt.value, *_SCOPE_BREAKERS):
                yield body, index


_Scope = TypeVar("_Scope", ast.ClassDef, ast.AsyncFunctionDef)


def _new_scope(node: type[_Scope], **fields: Any) -> _Scope:
    """`node(**fields)` with `type_params` (PEP 695, Python 3.12) empty where the grammar
    has it: 3.12's nodes leave a field not given unset, and 3.13 deprecates leaving it out."""
    if sys.version_info >= (3, 12):
        return node(**fields, type_params=[])
    return node(**fields)


def _class_body(tree: ast.Module, rng: random.Random) -> bool:
    sites = list(_discarded(tree))
    for n, (body, index) in enumerate(sites):
        stmt = body[index]
        body[index] = ast.copy_location(_plain(_new_scope(
            ast.ClassDef, name=f"CmPayload{n}", bases=[], keywords=[], body=[stmt],
            decorator_list=[])), stmt)
    return bool(sites)


def _format_spec(tree: ast.Module, rng: random.Random) -> bool:
    sites = list(_discarded(tree))
    for body, index in sites:
        stmt = body[index]
        assert isinstance(stmt, ast.Expr)
        # f"{'':{(value) and '' or ''}}": the value is computed while the spec is built
        spec = ast.BoolOp(ast.Or(), [ast.BoolOp(ast.And(), [stmt.value, ast.Constant("")]),
                                      ast.Constant("")])
        field = ast.FormattedValue(ast.Constant(""), -1, ast.JoinedStr(
            [ast.FormattedValue(spec, -1, None)]))
        stmt.value = ast.copy_location(ast.JoinedStr([field]), stmt.value)
    return bool(sites)


_SIMPLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Raise, ast.Assert,
           ast.Delete, ast.Import, ast.ImportFrom)


def _except_handler(tree: ast.Module, rng: random.Random) -> bool:
    final = _final_expr(tree)
    changed = False
    for body in list(_bodies(tree)):           # listed first: new handlers are not revisited
        for index, stmt in enumerate(list(body)):
            if not isinstance(stmt, _SIMPLE) or stmt is final or _has(stmt, ast.Await) \
                    or (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__") \
                    or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)) \
                    or (isinstance(stmt, ast.AnnAssign) and stmt.value is None):
                continue
            handler = ast.ExceptHandler(type=ast.Name("LookupError", ast.Load()), name=None,
                                        body=[stmt])
            body[index] = ast.copy_location(ast.Try(
                body=[ast.Raise(exc=ast.Name("LookupError", ast.Load()), cause=None)],
                handlers=[handler], orelse=[], finalbody=[]), stmt)
            changed = True
    return changed


def _eval_string(tree: ast.Module, rng: random.Random) -> bool:
    final = _final_expr(tree)
    changed = False
    for stmt in tree.body:
        if isinstance(stmt, ast.Expr) and stmt is not final \
                and not isinstance(stmt.value, ast.Constant) \
                and not _has(stmt.value, *_SCOPE_BREAKERS):
            source = _pieces(ast.unparse(stmt.value), rng)
            compiled = _call("compile", source, ast.Constant("<variant>"), ast.Constant("eval"))
            stmt.value = ast.copy_location(_call("eval", compiled), stmt.value)
            changed = True
    return changed


def _future_split(tree: ast.Module) -> tuple[list[ast.stmt], list[ast.stmt]]:
    body = list(tree.body)
    head = []
    while body and isinstance(body[0], ast.ImportFrom) and body[0].module == "__future__":
        head.append(body.pop(0))
    return head, body


def _exec_string(tree: ast.Module, rng: random.Random) -> bool:
    head, body = _future_split(tree)
    final = body.pop() if body and isinstance(body[-1], ast.Expr) else None
    if not body or _has(ast.Module(body=body, type_ignores=[]), ast.Await):
        return False
    lines = ast.unparse(ast.Module(body=body, type_ignores=[])).splitlines(keepends=True)
    step = max(1, len(lines) // rng.randint(2, 4))
    chunks = ["".join(lines[i:i + step]) for i in range(0, len(lines), step)]
    source = ast.Call(func=ast.Attribute(ast.Constant(""), "join", ast.Load()),
                      args=[ast.List([ast.Constant(c) for c in chunks], ast.Load())],
                      keywords=[])
    compiled = _call("compile", source, ast.Constant("<variant>"), ast.Constant("exec"))
    tree.body = [*head, ast.Expr(_call("exec", compiled)), *([final] if final else [])]
    return True


def _bound_names(body: Sequence[ast.stmt]) -> list[str]:
    """Names a module body binds at its top level (assignments, defs, imports, loops,
    with-targets, except names), in order of first appearance."""
    found: dict[str, None] = {}
    for node in ast.walk(ast.Module(body=list(body), type_ignores=[])):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            if not isinstance(node, ast.Lambda):
                found.setdefault(node.name)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            found.setdefault(node.id)
        elif isinstance(node, ast.alias):
            found.setdefault((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found.setdefault(node.name)
    return list(found)


def _async(tree: ast.Module, rng: random.Random) -> bool:
    head, body = _future_split(tree)
    final = body.pop() if body and isinstance(body[-1], ast.Expr) else None
    if not body or _has(ast.Module(body=body, type_ignores=[]), ast.Global, ast.Nonlocal) \
            or "asyncio.run" in ast.unparse(ast.Module(body=body, type_ignores=[])):
        return False
    names = _bound_names(body)
    inner: list[ast.stmt] = ([ast.Global(names=names)] if names else []) + body
    main = _plain(_new_scope(ast.AsyncFunctionDef, name="cm_variant_main", args=ast.arguments(
        posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]), body=inner,
        decorator_list=[], returns=None))
    run = ast.Expr(ast.Call(ast.Attribute(ast.Name("cm_variant_asyncio", ast.Load()), "run",
                                          ast.Load()), [_call("cm_variant_main")], []))
    tree.body = [*head, ast.Import(names=[ast.alias("asyncio", "cm_variant_asyncio")]), main,
                 run, *([final] if final else [])]
    return True


REWRITES: dict[str, Rewrite] = {
    "getattr": _getattr, "runtime-names": _runtime_names, "vars": _vars, "dict": _dict,
    "hex-strings": _hex_strings, "char-codes": _char_codes,
    "comprehension": _comprehension, "lambda": _lambda, "generator": _generator,
    "class-body": _class_body, "except-handler": _except_handler, "format-spec": _format_spec,
    "eval-string": _eval_string, "exec-string": _exec_string, "async": _async,
}


# ---- variants of cases -------------------------------------------------------------------

def rewrite_program(source: str, rewrite: str, rng: random.Random) -> str | None:
    """`source` rewritten by the named rewrite, or None when it has nothing to change or
    the result does not compile (top-level `await` allowed, as in the sandbox)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    original = ast.unparse(tree)
    changed = copy.deepcopy(tree)
    if not REWRITES[rewrite](changed, rng):
        return None
    try:
        text = ast.unparse(ast.fix_missing_locations(changed))
        compile(text, "<variant>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except (SyntaxError, ValueError, RecursionError):
        return None
    return None if text == original else text + "\n"


def _header(parent: Case, rewrite: str, seed: int) -> str:
    lines = [f"# id: {parent.id}--{rewrite}", f"# category: {parent.category}",
             f"# expect: {parent.expect}",
             f"# source: {parent.origin}; generated variant of {parent.id} "
             f"(rewrite {rewrite}, seed {seed})",
             f"# oracle: {', '.join(parent.oracles)}"]
    if parent.expect_error is not None:
        lines.append(f"# expect_error: {parent.expect_error}")
    if parent.labels:
        lines.append(f"# labels: {', '.join(parent.labels)}")
    lines.append(f"# variant: {rewrite} of {parent.id}, seed {seed}")
    return "\n".join(lines) + "\n"


def variant(parent: Case, rewrite: str, seed: int) -> Case | None:
    """One variant of `parent` by `rewrite` (None when the rewrite does not apply). Both
    phases of a two-phase case are rewritten."""
    rng = random.Random(f"{seed}:{parent.id}:{rewrite}")
    phases = [rewrite_program(p, rewrite, rng) for p in parent.phases]
    if any(p is None for p in phases):
        return None
    body = f"\n{PHASE_MARKER}\n".join(p for p in phases if p is not None)
    source = _header(parent, rewrite, seed) + body
    assert len(PHASE_SPLIT.split(source)) == len(parent.phases)
    return Case(id=f"{parent.id}--{rewrite}", category=parent.category,
                expect=parent.expect, origin=f"{parent.origin} (variant: {rewrite})",
                oracles=parent.oracles, expect_error=parent.expect_error,
                labels=parent.labels, path=f"{parent.path}::{rewrite}", source=source)


def variants_of(parent: Case, *, per_case: int, seed: int = 0) -> list[Case]:
    """Up to `per_case` variants of `parent`, rewrites tried in an order drawn from the
    seed, the first `per_case` that apply kept."""
    order = list(REWRITES)
    random.Random(f"{seed}:{parent.id}").shuffle(order)
    found: list[Case] = []
    for rewrite in order:
        if len(found) >= per_case:
            break
        made = variant(parent, rewrite, seed)
        if made is not None:
            found.append(made)
    return found


def generate(cases: Sequence[Case], *, per_case: int, seed: int = 0) -> list[Case]:
    """Up to `per_case` variants of every case, in corpus order (deterministic for `seed`)."""
    return [v for case in cases for v in variants_of(case, per_case=per_case, seed=seed)]


def write_escapes(cases: Sequence[Case], results: Iterable[object],
                  directory: Path) -> list[Path]:
    """Write each generated variant that escaped as a standalone case file
    (`DIRECTORY/<id>.py`, the header included) a user can add to a corpus; the files
    written."""
    by_id = {case.id: case for case in cases if "::" in case.path}
    written = []
    for result in results:
        case = by_id.get(getattr(result, "id", ""))
        if case is None or getattr(result, "outcome", "") != "escaped":
            continue
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{case.id}.py"
        path.write_text(case.source, encoding="utf-8")
        written.append(path)
    return written
