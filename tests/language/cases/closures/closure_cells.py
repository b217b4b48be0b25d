# restricted: refused (underscore name __code__)
def outer():
    x = 1
    def inner(): return x
    return inner
f = outer()
print(f.__code__.co_freevars, f.__closure__[0].cell_contents)
