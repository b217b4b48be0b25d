a = {"x": 1, "y": 2}; b = {"y": 3, "z": 4}
print(a | b, {**b, **a}, list((a | b).keys()))
a |= {"w": 0}; print(a)
d = {}; d["b"] = 1; d["a"] = 2; d["b"] = 3; del d["a"]; d["a"] = 4
print(d, list(reversed(d)))
