# restricted: refused (underscore name __class__)
class A:
    def who(self): return __class__.__name__
class B(A): pass
print(B().who())
