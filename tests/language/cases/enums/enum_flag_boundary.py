# restricted: skip (before 3.14, Flag CONFORM raises where 3.14 drops bits)
from enum import Flag, STRICT, CONFORM
class S(Flag, boundary=STRICT):
    A = 1
    B = 2
class C(Flag, boundary=CONFORM):
    A = 1
    B = 2
try: S(7)
except ValueError as e: print(e)
print(C(7))
