def count(n):
    i = 0
    while i < n:
        yield i
        i += 1
g = count(3)
print(next(g), list(g))
try: next(g)
except StopIteration: print("done")
