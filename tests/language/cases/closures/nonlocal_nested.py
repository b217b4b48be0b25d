# restricted: refused (nonlocal statement)
def a():
    v = "a"
    def b():
        def c():
            nonlocal v
            v += "c"
        c(); return v
    return b()
print(a())
