# restricted: xfail (a duplicate ** keyword names the tier's internal lambda, not f())
def f(*a, **k): return a, k
args = [1, 2]; kw = {"x": 1}
print(f(*args, 3, *args, **kw, y=2), f(**{"a": 1}, **{"b": 2}))
try: f(**{"a": 1}, **{"a": 2})
except TypeError as e: print(e)
