# restricted: refused (underscore name __setattr__)
tests = [lambda: [][1], lambda: {}["k"], lambda: int("1.5"), lambda: float("abc"),
         lambda: None.x, lambda: 1 + "a", lambda: "a" * "b", lambda: len(5),
         lambda: [1, 2].index(9), lambda: "abc".index("z"), lambda: tuple()[0],
         lambda: int(None), lambda: divmod(1, 0), lambda: chr(-1),
         lambda: {}.pop("x"), lambda: set().pop(), lambda: next(iter([])),
         lambda: object().__setattr__("a", 1), lambda: sorted([1, "a"])]
for t in tests:
    try: t()
    except Exception as e: print(type(e).__name__ + ":", e)
