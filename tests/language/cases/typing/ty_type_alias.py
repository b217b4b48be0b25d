# restricted: skip (host CPython 3.11 has no PEP 695 syntax)
type Vec = list[float]
type Tree[T] = T | list[Tree[T]]
print(Vec, Vec.__value__, type(Vec).__name__, Tree[int], Tree.__type_params__)
