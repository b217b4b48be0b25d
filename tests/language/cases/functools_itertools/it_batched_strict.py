# restricted: skip before 3.13 (itertools.batched(strict=) is new in 3.13)
import itertools as it
try:
    print(list(it.batched("abcde", 2, strict=True)))
except ValueError as e:
    print("ValueError", e)
