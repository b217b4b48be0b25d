"""Where a pending call would pass for something it is not, the program's own code waits for
its value instead (a rewrite of the program's tree, made after `callsite.analyse`).

A `PendingCall` (`pending.py`) stands in for its value wherever Python asks the object
itself: operators, `==`, truthiness, iteration, `len`, formatting, attributes,
`isinstance`. Two uses never ask it: identity (`p is None`, `p is not True`), which no
object can overload, `type(p)`, and `p in container` (the container asks: a set or a dict
hashes `p` by identity). Left alone, each would see the pending call and give a wrong
answer without an error (`u is None` False for a tool that returned None, `s in {"open"}`
False for a tool that returned "open"). So in a program that may run an event loop
(`callsite.may_run_a_loop`), every operand of a comparison with `is` / `is not`, and the
one argument of `type(x)`, is wrapped in `SETTLE_NAME(...)`, the program's name for
`pending.settle`: a pending call there is waited for and replaced by its value (a failed
call raises its `ToolCallError`), anything else is passed through unchanged. `a in b` (and
`not in`, unchained) becomes `CONTAINS_NAME(a, b)`, `pending.contains`: true when `a`
itself or, for a pending call, its value is in `b`.

The wrapping call takes the wrapped expression's position, so the call-site analysis (keyed
by each tool call's own position) and tracebacks are unchanged. A program that never runs
an event loop has no pending calls and is not rewritten.
"""

import ast

SETTLE_NAME = "__codemode_settle__"
CONTAINS_NAME = "__codemode_contains__"


class _Settling(ast.NodeTransformer):

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            call = ast.Call(func=ast.Name(CONTAINS_NAME, ast.Load()),
                            args=[node.left, node.comparators[0]], keywords=[])
            ast.copy_location(call.func, node)
            ast.copy_location(call, node)
            if isinstance(node.ops[0], ast.In):
                return call
            return ast.copy_location(ast.UnaryOp(op=ast.Not(), operand=call), node)
        if not any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            return node
        node.left = _settled(node.left)
        node.comparators = [_settled(c) for c in node.comparators]
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if (isinstance(node.func, ast.Name) and node.func.id == "type"
                and len(node.args) == 1 and not node.keywords
                and not isinstance(node.args[0], ast.Starred)):
            node.args = [_settled(node.args[0])]
        return node


def _settled(expr):
    if isinstance(expr, ast.Constant):      # `None`, `True`: never a pending call
        return expr
    call = ast.Call(func=ast.Name(SETTLE_NAME, ast.Load()), args=[expr], keywords=[])
    ast.copy_location(call.func, expr)
    return ast.copy_location(call, expr)


def settle_identity(tree):
    """Rewrite `tree` (a parsed program, in place) as the module docstring says; return
    it."""
    return _Settling().visit(tree)
