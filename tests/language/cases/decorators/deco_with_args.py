def repeat(n):
    def deco(fn):
        def w(*a):
            return [fn(*a) for _ in range(n)]
        return w
    return deco
@repeat(3)
def hi(x): return x.upper()
print(hi("a"))
