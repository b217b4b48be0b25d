# restricted: refused (underscore name __copy__)
import copy
class C:
    def __init__(self, v): self.v = v
    def __copy__(self): print("copy"); return C(self.v)
    def __deepcopy__(self, memo): print("deepcopy"); return C(copy.deepcopy(self.v, memo))
c = C([1]); print(copy.copy(c).v, copy.deepcopy(c).v is c.v)
print(copy.replace(__import__("datetime").date(2024, 1, 1), day=9))
