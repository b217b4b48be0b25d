# restricted: refused (functools.singledispatch is not exposed)
from functools import singledispatch
@singledispatch
def show(x): return f"obj {x!r}"
@show.register
def _(x: int): return f"int {x}"
@show.register(list)
def _(x): return "list " + ",".join(show(i) for i in x)
print(show(1), show("s"), show([1, "a"]), show(True))
