# restricted: refused (underscore name __repr__)
class V:
    def __init__(self, x, y): self.x, self.y = x, y
    def __repr__(self): return f"V({self.x!r}, {self.y!r})"
    def __str__(self): return f"<{self.x},{self.y}>"
v = V(1, "a")
print(v); print(repr(v)); print([v]); print(f"{v!r} {v!s}")
