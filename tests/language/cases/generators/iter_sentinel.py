data = iter([3, 2, 1, 0, 5])
print(list(iter(lambda: next(data), 0)))
