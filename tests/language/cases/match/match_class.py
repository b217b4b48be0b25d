# restricted: refused (match statement)
from dataclasses import dataclass
@dataclass
class Point:
    x: int
    y: int
def where(p):
    match p:
        case Point(x=0, y=0): return "origin"
        case Point(0, y): return f"on y at {y}"
        case Point(x, 0): return f"on x at {x}"
        case Point(x, y) if x == y: return "diagonal"
        case Point(): return "elsewhere"
print([where(Point(*a)) for a in [(0, 0), (0, 5), (3, 0), (2, 2), (1, 7)]])
