# restricted: refused (underscore name __slots__)
from dataclasses import dataclass
@dataclass(slots=True)
class A:
    x: int
@dataclass(slots=True)
class B(A):
    y: int = 2
b = B(1)
print(b, A.__slots__, B.__slots__, hasattr(b, "__dict__"))
