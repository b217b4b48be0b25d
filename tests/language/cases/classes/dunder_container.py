# restricted: refused (underscore name __getitem__)
class Bag:
    def __init__(self): self.d = {}
    def __getitem__(self, k): return self.d.get(k, 0)
    def __setitem__(self, k, v): self.d[k] = v
    def __delitem__(self, k): del self.d[k]
    def __len__(self): return len(self.d)
    def __contains__(self, k): return k in self.d
    def __iter__(self): return iter(sorted(self.d))
b = Bag(); b["x"] = 2; b["a"] = 1
print(len(b), "x" in b, b["zz"], list(b))
del b["x"]; print(list(b))
