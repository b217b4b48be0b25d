r = range(0, 20, 3)
print(r, list(r), len(r), r[2], r[-1], r[1:3], 9 in r, r.index(9), range(5)[::-1], range(0) == range(2, 2))
