"""A tool's call shape as a real Python function, so CPython itself binds every call.

`binder(alias, params, accepts_extra)` returns a function named `alias` whose parameters are
the tool's: positional-or-keyword in order, keyword-only for names that cannot be written
positionally (`"from"`, `"content-type"`: the stub puts them in `**kwargs`), and `**kwargs`
only when the schema asks for extra keys. Calling it returns the bound arguments as a dict, or
raises CPython's own `TypeError` ("got an unexpected keyword argument 'max_cout'. Did you mean
'max_count'?", "missing 1 required positional argument: 'b'", "takes 2 positional arguments but
3 were given").

Any name a JSON Schema allows works (`self`, `cls`, Python keywords, names with dashes): the
function is compiled with placeholder names, then its code object gets the real ones
(`co_varnames`), which CPython matches keywords against as plain strings.
"""

# An omitted optional argument: left out of the call (the host applies the schema's default).
OMITTED = object()

_cache = {}
_EXTRA = "\x00**kwargs"


def binder(alias, params, accepts_extra):
    """params: [(name, required, keyword_only)] in signature order. Cached per shape."""
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
    source, names = [], []
    for name, required, _ in positional:
        source.append(f"_{len(names)}" + ("" if required else "=_O"))
        names.append(name)
    if keyword:
        source.append("*")
        for name, required, _ in keyword:
            source.append(f"_{len(names)}" + ("" if required else "=_O"))
            names.append(name)
    if accepts_extra:
        source.append("**_extra")
    scope = {"_O": OMITTED}
    exec(f"def {alias}({', '.join(source)}):\n    return locals()\n", scope)
    fn = scope[alias]
    # The **kwargs slot gets a name no keyword can collide with (it is never matched).
    extra = (_EXTRA,) if accepts_extra else ()
    fn.__code__ = fn.__code__.replace(co_varnames=(*names, *extra))
    kwdefaults = {name: OMITTED for name, required, _ in keyword if not required}
    fn.__kwdefaults__ = kwdefaults or None
    return fn


def bind(fn, args, kwargs):
    """The call's arguments by name (omitted optional ones left out), or CPython's TypeError."""
    bound = fn(*args, **kwargs)
    extra = bound.pop(_EXTRA, None)
    out = {k: v for k, v in bound.items() if v is not OMITTED}
    if extra:
        out.update(extra)
    return out
