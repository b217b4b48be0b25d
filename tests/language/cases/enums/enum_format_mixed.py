from enum import Enum
class E(Enum):
    A = 1
class M(int, Enum):
    B = 2
print(str(E.A), format(E.A), f"{E.A}", str(M.B), f"{M.B}")
try: print(format(M.B, "d"))
except ValueError as e: print(e)
