# restricted: skip (PEP 695 syntax is new in 3.12; from then on the tier refuses `type` statements)
type Vec = list[float]
type Tree[T] = T | list[Tree[T]]
print(Vec, Vec.__value__, type(Vec).__name__, Tree[int], Tree.__type_params__)
