m = [[1, 2, 3], [4, 5, 6]]
print([x for row in m for x in row if x % 2], [[r[i] for r in m] for i in range(3)])
print({k: v for k, v in zip("abc", range(3))}, sorted({x % 3 for x in range(10)}), list(x * x for x in range(4)))
