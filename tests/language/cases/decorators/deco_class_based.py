# restricted: refused (underscore name __call__)
class Count:
    def __init__(self, fn): self.fn = fn; self.n = 0
    def __call__(self, *a): self.n += 1; return self.fn(*a)
@Count
def sq(x): return x * x
sq(2); sq(3); print(sq(4), sq.n)
