# restricted: refused (underscore name __repr__)
n = 123456789
print(bin(n), oct(n), hex(n), format(n, "_b"), format(n, "_x"), f"{n:,}", f"{-n:#o}")
print(int.__name__, (2 ** 100).__repr__(), str(-2 ** 63))
