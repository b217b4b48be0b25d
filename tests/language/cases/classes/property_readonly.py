class P:
    @property
    def x(self): return 1
p = P()
try:
    p.x = 2
except AttributeError as e:
    print(e)
