# restricted: refused (match statement)
def f(x):
    match x:
        case int(v) if v < 0: return "neg"
        case bool(): return "bool"
        case int(): return "int"
        case str(s): return "str:" + s
        case (1, 2) | [3, 4]: return "pair"
print(f(-1), f(True), f(3), f("x"), f((1, 2)), f([3, 4]))
