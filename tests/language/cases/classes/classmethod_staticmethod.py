# restricted: refused (augmented assignment to an attribute)
class C:
    n = 0
    @classmethod
    def make(cls): cls.n += 1; return cls()
    @staticmethod
    def add(a, b): return a + b
class D(C): pass
D.make(); D.make(); C.make()
print(C.n, D.n, C.add(1, 2), D().add(3, 4))
