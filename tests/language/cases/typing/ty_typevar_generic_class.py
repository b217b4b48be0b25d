# restricted: skip (PEP 695 syntax is new in 3.12; from then on the tier refuses `__parameters__`)
from typing import TypeVar, Generic
T = TypeVar("T")
class Box(Generic[T]):
    def __init__(self, v: T): self.v = v
print(Box[int], Box[int](3).v, T, Box.__parameters__)
class Pair[K, V]:
    def __init__(self, k: K, v: V): self.k, self.v = k, v
print(Pair.__type_params__, Pair[str, int])
def first[X](xs: list[X]) -> X: return xs[0]
print(first([9]), first.__type_params__)
