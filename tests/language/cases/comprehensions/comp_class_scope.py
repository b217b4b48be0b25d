class C:
    n = 3
    try:
        xs = [n for _ in range(2)]
    except NameError as e:
        err = str(e)
    ys = [i for i in range(n)]
print(getattr(C, "xs", None), getattr(C, "err", None), C.ys)
