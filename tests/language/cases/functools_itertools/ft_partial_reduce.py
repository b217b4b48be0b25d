# restricted: xfail (builtins such as max are Python wrappers, so their repr shows a function address)
from functools import partial, reduce
import operator
p = partial(int, base=2)
print(p("1010"), p.func.__name__, p.keywords, reduce(operator.mul, range(1, 6)), reduce(lambda a, b: a + b, [], "init"))
print(repr(partial(max, 1, key=abs)))
