# restricted: refused (underscore name _t)
class Proxy:
    def __init__(self, t): self._t = t
    def __getattr__(self, n):
        print("fallback", n)
        return getattr(self._t, n)
p = Proxy([3, 1, 2])
p.sort(); print(p._t)
try: p.nope
except AttributeError as e: print(e)
