# restricted: refused (underscore name __enter__)
class CM:
    def __init__(self, n): self.n = n
    def __enter__(self): print("enter", self.n); return self
    def __exit__(self, et, ev, tb):
        print("exit", self.n, et.__name__ if et else None)
        return et is KeyError
with CM(1), CM(2) as b:
    print("body", b.n)
with CM(3):
    raise KeyError("x")
print("after")
