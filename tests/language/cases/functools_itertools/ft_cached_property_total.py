# restricted: refused (augmented assignment to an attribute)
from functools import cached_property
class C:
    def __init__(self): self.n = 0
    @cached_property
    def v(self):
        self.n += 1; return self.n * 100
c = C(); print(c.v, c.v, c.n); del c.v; print(c.v)
