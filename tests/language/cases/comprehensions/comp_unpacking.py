# restricted: skip (the host's CPython (3.11 to 3.13) prints differently from 3.14)
first, *mid, last = range(6)
print(first, mid, last)
(a, b), c = (1, 2), 3
print(a, b, c, [*range(3), *"ab"], {**{"a": 1}, "b": 2}, (*[1], 2))
try: a, b = [1, 2, 3]
except ValueError as e: print(e)
try: a, b, c = [1, 2]
except ValueError as e: print(e)
