m = map(lambda x: x * x, range(4))
print(type(m).__name__, list(m), list(m))
print(list(filter(None, [0, 1, "", "a", None, []])))
