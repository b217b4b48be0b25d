# restricted: skip (typing.override is new in 3.12; from then on the tier refuses its `__override__`)
from typing import Self, override
class A:
    def me(self) -> Self: return self
    def f(self): pass
class B(A):
    @override
    def f(self): pass
print(type(B().me()).__name__, getattr(B.f, "__override__", None))
