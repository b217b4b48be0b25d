# restricted: refused (underscore name __get__)
class Lazy:
    def __init__(self, f): self.f = f
    def __get__(self, obj, typ=None):
        if obj is None: return self
        v = self.f(obj); obj.__dict__[self.f.__name__] = v; print("computed"); return v
class C:
    @Lazy
    def val(self): return 42
c = C(); print(c.val); print(c.val)
