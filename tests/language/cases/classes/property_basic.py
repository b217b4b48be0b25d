# restricted: refused (underscore name _c)
class T:
    def __init__(self): self._c = 0.0
    @property
    def c(self): return self._c
    @c.setter
    def c(self, v):
        if v < -273.15: raise ValueError("too cold")
        self._c = v
    @c.deleter
    def c(self): print("deleting"); self._c = 0
t = T(); t.c = 21.5; print(t.c)
try: t.c = -300
except ValueError as e: print("error:", e)
del t.c; print(t.c)
