# restricted: refused (underscore name __hash__)
class K:
    def __init__(self, k): self.k = k
    def __eq__(self, o): return isinstance(o, K) and o.k == self.k
print(K.__hash__)
try: {K(1)}
except TypeError as e: print(e)
class H(K):
    def __hash__(self): return hash(self.k)
print(len({H(1), H(1), H(2)}))
