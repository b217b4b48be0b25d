x = "global"
class C:
    x = "class"
    y = [x for _ in range(1)]
    def f(self): return x
print(C.y, C().f())
