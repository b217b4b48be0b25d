x = "outer"
r = [x for x in range(3)]
print(x, r)
print([y for y in range(3) if (z := y) > 0], z)
