# restricted: skip (host CPython 3.11 prints differently from 3.14)
from typing import ParamSpec, Callable, Concatenate, TypeVarTuple, Unpack
P = ParamSpec("P"); Ts = TypeVarTuple("Ts")
print(P, P.args, Callable[Concatenate[int, P], int], tuple[Unpack[Ts]], tuple[*Ts])
