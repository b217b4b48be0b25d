# restricted: refused (builtin locals() is not provided)
def f(a, b=2):
    c = a + b
    return sorted(locals().items())
print(f(1))
