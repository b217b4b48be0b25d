def f():
    x = 10
    r = [x * i for i in range(3)]
    return r, x, [i for i in range(2)]
print(f())
