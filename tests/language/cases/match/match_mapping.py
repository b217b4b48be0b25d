# restricted: refused (match statement)
def f(ev):
    match ev:
        case {"type": "click", "pos": (x, y)}: return f"click {x},{y}"
        case {"type": "key", **rest}: return f"key {rest}"
        case {}: return "empty-ish"
print(f({"type": "click", "pos": (1, 2)}), f({"type": "key", "k": "a", "m": 1}), f({"z": 1}))
