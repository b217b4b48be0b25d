print(hash(1) == hash(1.0) == hash(True), hash(-1), hash(float("inf")), hash(-2) == hash(-1))
from fractions import Fraction; from decimal import Decimal
print(hash(Fraction(1, 2)) == hash(0.5) == hash(Decimal("0.5")), {1: "a", 1.0: "b", True: "c"})
