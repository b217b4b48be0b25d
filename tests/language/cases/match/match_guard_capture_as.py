# restricted: refused (match statement)
def f(x):
    match x:
        case [int(n), *_] as whole if n > 10: return f"big {n} in {whole}"
        case [int() | float() as n, *_]: return f"num {n!r}"
        case str() as s: return f"str {s}"
        case _: return "?"
print(f([20, 1]), f([3.5]), f([5]), f("hi"), f({}))
