# restricted: skip before 3.13 (the host's CPython before 3.13 prints differently from 3.14)
from dataclasses import dataclass
try:
    @dataclass
    class C:
        a: int = 1
        b: int
except TypeError as e:
    print(e)
