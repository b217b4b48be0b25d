from dataclasses import dataclass, replace, KW_ONLY
@dataclass
class P:
    x: int
    _: KW_ONLY
    y: int = 0
    z: int = 0
p = P(1, z=3)
print(p, replace(p, y=9))
try: P(1, 2)
except TypeError as e: print(e)
