# xfail: wasm32: sys.maxsize is 2**31 - 1 (64-bit CPython: 2**63 - 1), so len() and indices overflow sooner
# restricted: refused (module sys is not importable)
import sys
print(sys.maxsize == 2 ** 63 - 1)
try:
    print(len(range(2 ** 40)))
except OverflowError as e:
    print("OverflowError", e)
