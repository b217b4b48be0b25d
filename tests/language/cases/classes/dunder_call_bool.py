# restricted: refused (underscore name __call__)
class F:
    def __call__(self, *a, **k): return a, k
    def __bool__(self): return False
f = F()
print(f(1, z=2), bool(f), "yes" if f else "no")
class L:
    def __len__(self): return 0
print(bool(L()))
