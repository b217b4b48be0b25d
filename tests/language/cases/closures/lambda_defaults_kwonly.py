f = lambda a, /, b=2, *args, c, **kw: (a, b, args, c, kw)
print(f(1, c=3), f(1, 2, 3, 4, c=5, d=6))
try: f(a=1, c=2)
except TypeError as e: print(e)
