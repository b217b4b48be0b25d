# restricted: refused (underscore name __members__)
from enum import Enum, unique
class A(Enum):
    X = 1
    Y = 1
print(A.Y, A.Y is A.X, list(A), list(A.__members__))
try:
    @unique
    class B(Enum):
        P = 1
        Q = 1
except ValueError as e:
    print(e)
