# restricted: refused (underscore name __doc__)
import functools
def logged(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        print(f"call {fn.__name__}{a}")
        return fn(*a, **k)
    return wrapper
@logged
def add(x, y):
    "Add two."
    return x + y
print(add(1, 2), add.__name__, add.__doc__, add.__wrapped__(3, 4))
