import itertools as it
data = "aaabccdaa"
print([(k, len(list(g))) for k, g in it.groupby(data)])
rows = [("x", 1), ("y", 2), ("x", 3)]
print({k: [v for _, v in g] for k, g in it.groupby(sorted(rows), key=lambda r: r[0])})
