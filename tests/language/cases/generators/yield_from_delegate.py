def inner():
    x = yield "i1"
    print("inner got", x)
    yield "i2"
def outer():
    yield "o1"
    yield from inner()
    yield "o2"
g = outer()
print(next(g), next(g), g.send("S"), next(g))
