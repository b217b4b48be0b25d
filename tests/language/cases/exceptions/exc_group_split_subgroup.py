eg = ExceptionGroup("top", [ValueError("a"), ExceptionGroup("inner", [KeyError("b"), ValueError("c")])])
match, rest = eg.split(ValueError)
print(repr(match)); print(repr(rest))
print(repr(eg.subgroup(lambda e: isinstance(e, KeyError))))
