# restricted: skip before 3.12 (the host's CPython before 3.12 prints differently from 3.14)
from typing import ParamSpec, Callable, Concatenate, TypeVarTuple, Unpack
P = ParamSpec("P"); Ts = TypeVarTuple("Ts")
print(P, P.args, Callable[Concatenate[int, P], int], tuple[Unpack[Ts]], tuple[*Ts])
