def src():
    for i in range(5):
        print("produce", i); yield i
g = (x * 2 for x in src() if x % 2)
print("created"); print(next(g)); print(list(g))
