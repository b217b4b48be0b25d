def g():
    yield 1
    return "ret"
def outer():
    r = yield from g()
    yield r
print(list(outer()))
