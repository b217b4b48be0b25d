"""What a program can read of its tools: `inspect.signature(tool)` and `help(tool)`.

A tool's signature is the one its stub shows the model (the `def` line the host sends as
the tool spec's `signature`): parameters with their types, defaults and return type, the
types printed as written (`list[str] | None`, `Literal["c", "f"]`, a TypedDict's name: the
program has no such classes, so a type is its text, `Annotation`). `help` prints that
signature and the tool's docstring (its description and `Args:`); the guest has no `pydoc`,
so `help` is this small one, for tools and for anything else (a function's signature and
docstring, a module's or class's public names).

`signature(obj)` is what the restricted tier offers as `inspect.signature`: a tool's as
above, anything else's with its defaults and annotations shown as text unless they are
plain values (None, bool, int, float, str), so no object of the host process reaches the
program through a signature.
"""

import ast
import inspect
import sys
import types

_PLAIN = (type(None), bool, int, float, str)


class Annotation:
    """A type, or a default, as text: its repr is the text, so a signature prints it as
    the stub writes it (`city: str`, not `city: 'str'`). Equal to another of the same text."""

    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text

    def __eq__(self, other):
        return type(other) is Annotation and other.text == self.text

    def __hash__(self):
        return hash(self.text)


class Signature(inspect.Signature):
    """`inspect.Signature` whose `from_callable` is `signature` below (reached through
    `type(sig)`, it must not give the host's objects back)."""

    __slots__ = ()

    @classmethod
    def from_callable(cls, obj, *, follow_wrapped=True, globals=None, locals=None,
                      eval_str=False, **kwargs):
        return signature(obj, follow_wrapped=follow_wrapped)


class Described:
    """What a tool binding shows of itself: `__signature__`, the stub's signature (its
    spec's `signature`, the `def` line; without one, made from `params`), made at the first
    look. The binding sets `_spec`, `_inspected` (None), `alias` and `__doc__`."""

    @property
    def __signature__(self):
        if self._inspected is None:
            spec = self._spec
            self._inspected = (from_def(spec.get("signature") or "")
                               or from_params(spec.get("params", ()),
                                              spec.get("accepts_extra", True)))
        return self._inspected


def from_def(def_line):
    """The `Signature` of a stub's `def` line (`def f(a: int, b: str = "x") -> R:`); None
    when there is none or it does not parse."""
    source = def_line + " ..."
    try:
        fn = ast.parse(source).body[0]
    except (SyntaxError, ValueError, IndexError):
        return None
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    P = inspect.Parameter
    args = fn.args
    params = []
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for i, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        kind = P.POSITIONAL_ONLY if i < len(args.posonlyargs) else P.POSITIONAL_OR_KEYWORD
        params.append(_parameter(source, arg, kind, default))
    if args.vararg is not None:
        params.append(_parameter(source, args.vararg, P.VAR_POSITIONAL, None))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        params.append(_parameter(source, arg, P.KEYWORD_ONLY, default))
    if args.kwarg is not None:
        params.append(_parameter(source, args.kwarg, P.VAR_KEYWORD, None))
    try:
        return Signature(params, return_annotation=_annotation(source, fn.returns))
    except (TypeError, ValueError):
        return None


def _parameter(source, arg, kind, default):
    value = inspect.Parameter.empty
    if default is not None:
        try:
            value = ast.literal_eval(default)
        except ValueError:
            value = _annotation(source, default)
    return inspect.Parameter(arg.arg, kind, default=value,
                             annotation=_annotation(source, arg.annotation))


def _annotation(source, node):
    """`node`'s text as the stub writes it (`Literal["c", "f"]`, not `ast.unparse`'s
    `Literal['c', 'f']`)."""
    if node is None:
        return inspect.Parameter.empty
    return Annotation(ast.get_source_segment(source, node) or ast.unparse(node))


def from_params(params, accepts_extra):
    """A tool's `Signature` from its parameter specs alone (a spec without `signature`):
    names, and `None` for the optional ones; `**kwargs` for names that are not Python
    names and for extra keys."""
    P = inspect.Parameter
    out, extra = [], accepts_extra
    for p in params:
        if p.get("keyword_only"):
            extra = True
        else:
            out.append(P(p["name"], P.POSITIONAL_OR_KEYWORD,
                         default=P.empty if p.get("required") else None))
    if extra:
        out.append(P("kwargs", P.VAR_KEYWORD))
    return Signature(out)


def signature(obj, *, follow_wrapped=True):
    """`inspect.signature(obj)` for the restricted tier: a tool's as its stub shows it,
    anything else's with defaults and annotations that are not plain values as text."""
    sig = getattr(obj, "__signature__", None) if _is_tool(obj) else None
    if isinstance(sig, inspect.Signature):
        return sig
    real = inspect.signature(obj, follow_wrapped=follow_wrapped)
    return Signature([p.replace(default=_shown(p.default), annotation=_shown(p.annotation))
                      for p in real.parameters.values()],
                     return_annotation=_shown(real.return_annotation))


def _shown(value):
    if value is inspect.Parameter.empty or type(value) in _PLAIN:
        return value
    return Annotation(inspect.formatannotation(value) if isinstance(value, type)
                      else repr(value))


def _is_tool(obj):
    return isinstance(obj, Described)


def make_help(bindings, write=None):
    """The program's `help(obj)`: prints what `obj` is (no `pydoc` needed), to `write`
    (default: the program's `sys.stdout` at the time). `help()` lists the tools;
    `help("name")` is the tool of that alias, or says there is none."""

    def out(text):
        (write or sys.stdout.write)(text + "\n")

    def help(obj=_NOTHING, /):
        if obj is _NOTHING:
            names = ", ".join(sorted(bindings)) or "(none)"
            out("Tools (call help(tool) for one): " + names + "\nhelp(obj) shows the "
                "signature and docstring of a function, class or module.")
            return
        if type(obj) is str:
            if obj not in bindings:
                out(f"No tool named {obj!r}; tools: " + ", ".join(sorted(bindings)))
                return
            obj = bindings[obj]
        out(describe(obj))

    return help


_NOTHING = object()


def describe(obj):
    """`help`'s text for `obj`: a header, the signature, the docstring indented; for a
    module, a class or a value, its public names too."""
    if _is_tool(obj):
        header = f"Help on tool {obj.alias}:\n\n{obj.alias}{obj.__signature__}"
        doc = obj.__doc__ or ""
    elif isinstance(obj, (type, types.ModuleType)) or callable(obj):
        name = getattr(obj, "__name__", None)
        name = name if type(name) is str else type(obj).__name__
        kind = ("module" if isinstance(obj, types.ModuleType) else
                "class" if isinstance(obj, type) else "function")
        header = f"Help on {kind} {name}:\n\n{name}"
        if callable(obj):
            try:
                header += str(signature(obj))
            except (TypeError, ValueError):
                pass
        doc = inspect.getdoc(obj) or ""
    else:                     # a value (or a module as a view of it): what its type says
        header = f"Help on {_short(repr(obj))}:"
        doc = inspect.getdoc(obj) or ""
    if (not _is_tool(obj) and not callable(obj)) or isinstance(obj, type):
        public = [n for n in dir(obj) if not n.startswith("_")]
        if public:
            doc += ("\n\n" if doc else "") + "Names: " + ", ".join(public)
    body = "\n".join(("    " + line) if line else "" for line in doc.splitlines())
    return header + ("\n" + body if body else "")


def _short(text, limit=80):
    return text if len(text) <= limit else text[: limit - 1] + "…"
