# xfail: wasm32: sys.hash_info.modulus is 2**31 - 1, so hashes of numbers differ from 64-bit CPython (2**61 - 1)
# restricted: refused (module sys is not importable)
import sys
print(sys.hash_info.modulus == 2 ** 61 - 1, hash(2 ** 61 - 1), hash(0.5), hash(2 ** 40), sys.hash_info.width)
