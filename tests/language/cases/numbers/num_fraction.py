# restricted: skip before 3.12 (Fraction.__format__ for float presentation types is new in 3.12)
from fractions import Fraction as F
print(F(1, 3) + F(1, 6), F("0.75"), F(0.1), F(0.1).limit_denominator(100), F(3, -6), F(7, 3) // 1, float(F(1, 8)))
print(F(1, 3) ** 2, F(2) ** F(1, 2), round(F(7, 2)), F(5, 4).as_integer_ratio(), f"{F(1, 3):.5f}")
try: F(1, 0)
except ZeroDivisionError as e: print(e)
