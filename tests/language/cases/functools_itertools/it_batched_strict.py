# restricted: skip (host CPython 3.11 has no itertools.batched)
import itertools as it
try:
    print(list(it.batched("abcde", 2, strict=True)))
except ValueError as e:
    print("ValueError", e)
