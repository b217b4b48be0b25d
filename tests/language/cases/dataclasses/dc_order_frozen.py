from dataclasses import dataclass, FrozenInstanceError
@dataclass(order=True, frozen=True)
class V:
    major: int
    minor: int = 0
print(sorted([V(1, 2), V(0, 9), V(1, 0)]))
v = V(1)
try: v.major = 3
except FrozenInstanceError as e: print(type(e).__name__, e)
print(hash(V(1, 2)) == hash(V(1, 2)))
