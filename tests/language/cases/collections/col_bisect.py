import bisect
xs = [1, 3, 3, 5, 8]
print(bisect.bisect_left(xs, 3), bisect.bisect_right(xs, 3), bisect.bisect(xs, 10), bisect.bisect_left(xs, 0))
bisect.insort(xs, 4); print(xs)
grades = "FDCBA"
print([grades[bisect.bisect([60, 70, 80, 90], s)] for s in [33, 99, 77, 70, 89, 90]])
print(bisect.bisect_left([{"k": 1}, {"k": 5}], 3, key=lambda d: d["k"]))
