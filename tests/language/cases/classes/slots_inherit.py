# restricted: refused (underscore name __slots__)
class A:
    __slots__ = ("x",)
class B(A):
    pass
b = B(); b.x = 1; b.y = 2
print(b.x, b.y, sorted(vars(b)))
