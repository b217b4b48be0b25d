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
function is compiled with placeholder names, then its code object gets the real ones
(`co_varnames`), which CPython matches keywords against as plain strings.
"""

# An omitted optional argument: left out of the call (the host applies the schema's default).
OMITTED = object()

_cache = {}
_EXTRA = "\x00**kwargs"


def binder(alias, params, accepts_extra):
    """params: [(name, required, keyword_only, omit_if_none)] in signature order. Cached per
    shape (a program's tools are bound once per run, mostly the same shapes every run)."""
    key = (alias, tuple(params), bool(accepts_extra))
    fn = _cache.get(key)
    if fn is None:
        fn = _cache[key] = _build(alias, params, accepts_extra)
    return fn


def _build(alias, params, accepts_extra):
    positional = [p for p in params if not p[2]]
    keyword = [p for p in params if p[2]]
    # A required parameter after an optional one cannot be positional in Python: from there
    # on, every parameter is keyword-only (the stub lists required ones first anyway).
    first_optional = next((i for i, p in enumerate(positional) if not p[1]), len(positional))
    if any(p[1] for p in positional[first_optional:]):
        keyword = positional[first_optional:] + keyword
        positional = positional[:first_optional]
    source, names, body = [], [], []
    for group in (positional, keyword):
        if group is keyword and keyword:
            source.append("*")
        for name, required, _, omit_if_none in group:
            slot = f"_{len(names)}"
            source.append(slot + ("" if required else "=_O"))
            names.append(name)
            # The body builds the dict itself (no `locals()` to filter): one dict per call.
            tests = ([] if required else [f"{slot} is not _O"]) + (
                [f"{slot} is not None"] if omit_if_none else [])
            store = f"_d[{name!r}] = {slot}"
            body.append(f"    if {' and '.join(tests)}:\n        {store}" if tests
                        else f"    {store}")
    if accepts_extra:
        source.append("**_extra")
        body.append("    if _extra:\n        _d.update(_extra)")
    scope = {"_O": OMITTED}
    exec(f"def {alias}({', '.join(source)}):\n    _d = {{}}\n" + "\n".join(body)
         + "\n    return _d\n", scope)
    fn = scope[alias]
    # The **kwargs slot gets a name no keyword can collide with (it is never matched); the
    # local `_d` keeps its own name, past the parameters (never matched either).
    code = fn.__code__
    extra = (_EXTRA,) if accepts_extra else ()
    fn.__code__ = code.replace(
        co_varnames=(*names, *extra, *code.co_varnames[len(names) + len(extra):]))
    kwdefaults = {name: OMITTED for name, required, _, _ in keyword if not required}
    fn.__kwdefaults__ = kwdefaults or None
    return fn
