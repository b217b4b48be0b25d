# restricted: refused (match statement)
def f(x):
    match x:
        case 0: return "zero"
        case 1 | 2: return "small"
        case "a": return "letter a"
        case None: return "none"
        case True: return "true"
        case _: return "other"
print([f(v) for v in [0, 1, 2, "a", None, True, 3.5, False]])
