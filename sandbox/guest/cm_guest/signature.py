"""A tool's call shape as a real Python function, so CPython itself binds every call.

`binder(alias, params, accepts_extra)` returns a function named `alias` whose parameters are
the tool's: positional-or-keyword in order, keyword-only for names that cannot be written
positionally (`"from"`, `"content-type"`: the stub puts them in `**kwargs`), and `**kwargs`
only when the schema asks for extra keys. Calling it returns the call's arguments as a new
dict by name (an omitted optional argument left out, and an explicit None too for an
`omit_if_none` parameter; extra keywords last), or raises CPython's own `TypeError` ("got an
unexpected keyword argument 'max_cout'. Did you mean 'max_count'?", "missing 1 required
positional argument: 'b'", "takes 2 positional arguments but 3 were given").

Any name a JSON Schema allows works (`self`, `cls`, Python keywords, names with dashes): the
function's code is a template compiled with placeholder names (one per shape, made in the
snapshot, so binding a fresh instance's tools compiles nothing), renamed with the real ones
(`co_varnames`), which CPython matches keywords against as plain strings.
"""

import itertools
from types import FunctionType

# An omitted optional argument: left out of the call (the host applies the schema's default).
OMITTED = object()

_EXTRA = "\x00**kwargs"
# Templates made in the snapshot: every shape up to this many positional and keyword-only
# parameters, with and without **kwargs (a fresh instance then compiles nothing to bind its
# tools; a larger shape is compiled on first use). More shapes made ahead cost every pooled
# instance memory: 90 shapes (8 and 4) added ~0.2 MiB of PSS each, these 30 none measurable.
_PREMADE_POSITIONAL = 4
_PREMADE_KEYWORD = 2


def binder(alias, params, accepts_extra):
    """params: [(name, required, keyword_only, omit_if_none)] in signature order.

    The function's code comes from a template per shape (how many positional and keyword-only
    parameters, and **kwargs or not), renamed for this tool with `code.replace`: the names
    are its `co_varnames`, which and whether an argument is optional its defaults, and its
    globals say the keys and which arguments are left out when None."""
    positional = [p for p in params if not p[2]]
    keyword = [p for p in params if p[2]]
    # A required parameter after an optional one cannot be positional in Python: from there
    # on, every parameter is keyword-only (the stub lists required ones first anyway).
    first_optional = next((i for i, p in enumerate(positional) if not p[1]), len(positional))
    if any(p[1] for p in positional[first_optional:]):
        keyword = positional[first_optional:] + keyword
        positional = positional[:first_optional]
    ordered = positional + keyword
    names = tuple(p[0] for p in ordered)
    template = _template(len(positional), len(keyword), bool(accepts_extra))
    # The **kwargs slot gets a name no keyword can collide with (it is never matched); the
    # local `_d` keeps its own name, past the parameters (never matched either).
    extra = (_EXTRA,) if accepts_extra else ()
    code = template.replace(
        co_name=alias, co_qualname=alias,
        co_varnames=(*names, *extra, *template.co_varnames[len(names) + len(extra):]))
    scope = {"_O": OMITTED, "_N": names, "_K": tuple(not p[3] for p in ordered)}
    defaults = tuple(OMITTED for p in positional if not p[1]) or None
    fn = FunctionType(code, scope, alias, defaults)
    fn.__kwdefaults__ = {p[0]: OMITTED for p in keyword if not p[1]} or None
    return fn


def _template(n_positional, n_keyword, accepts_extra):
    key = (n_positional, n_keyword, accepts_extra)
    code = _templates.get(key)
    if code is None:
        code = _templates[key] = _compile(*key)
    return code


def _compile(n_positional, n_keyword, accepts_extra):
    slots = [f"_{i}" for i in range(n_positional + n_keyword)]
    source = slots[:n_positional] + (["*"] if n_keyword else []) + slots[n_positional:]
    if accepts_extra:
        source.append("**_extra")
    # The body builds the dict itself (no `locals()` to filter): one dict per call. An
    # argument is kept unless omitted, or None where `_K` says None is left out.
    body = [f"    if {slot} is not _O and ({slot} is not None or _K[{i}]):\n"
            f"        _d[_N[{i}]] = {slot}" for i, slot in enumerate(slots)]
    if accepts_extra:
        body.append("    if _extra:\n        _d.update(_extra)")
    scope = {}
    exec(f"def _bound({', '.join(source)}):\n    _d = {{}}\n" + "\n".join(body)
         + "\n    return _d\n", scope)
    return scope["_bound"].__code__


_templates = {}
for _shape in itertools.product(range(_PREMADE_POSITIONAL + 1), range(_PREMADE_KEYWORD + 1),
                                (False, True)):
    _template(*_shape)
