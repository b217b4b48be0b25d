# restricted: skip (host CPython 3.11 has no typing.override)
from typing import Self, override
class A:
    def me(self) -> Self: return self
    def f(self): pass
class B(A):
    @override
    def f(self): pass
print(type(B().me()).__name__, getattr(B.f, "__override__", None))
