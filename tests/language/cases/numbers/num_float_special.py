# restricted: skip (the host's CPython (3.11 to 3.13) prints differently from 3.14)
inf, nan = float("inf"), float("nan")
print(inf, -inf, nan, inf - inf, nan == nan, nan is nan, inf > 1e308, float("-0.0"), 0.0 == -0.0)
import math
print(math.isnan(nan), math.isinf(-inf), math.copysign(1, -0.0), math.isclose(0.1 + 0.2, 0.3))
try: 1 / 0.0
except ZeroDivisionError as e: print(e)
try: math.sqrt(-1)
except ValueError as e: print(e)
try: int(inf)
except OverflowError as e: print(e)
try: int(nan)
except ValueError as e: print(e)
