# restricted: refused (match statement)
def f(x):
    match x:
        case []: return "empty"
        case [a]: return f"one {a}"
        case [a, b]: return f"two {a} {b}"
        case [a, *rest]: return f"first {a} rest {rest}"
print(f([]), f([1]), f((1, 2)), f([1, 2, 3, 4]), f("ab"))
