from enum import StrEnum, IntEnum, auto
class S(StrEnum):
    UP = auto()
    DOWN = "down!"
class N(IntEnum):
    ONE = 1
    TWO = 2
print(S.UP, repr(S.UP), S.UP == "up", S.DOWN.upper(), f"{S.DOWN}")
print(N.ONE + 1, N.TWO, repr(N.TWO), f"{N.TWO}", N.ONE < N.TWO, format(N.ONE, "03d"))
