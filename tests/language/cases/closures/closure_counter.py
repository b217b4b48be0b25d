# restricted: refused (nonlocal statement)
def make():
    n = 0
    def inc():
        nonlocal n
        n += 1
        return n
    return inc
a, b = make(), make()
print(a(), a(), a(), b())
