def acc():
    total = 0
    while True:
        x = yield total
        if x is None: break
        total += x
g = acc(); next(g)
print(g.send(3), g.send(4))
try: g.send(None)
except StopIteration as e: print("stop", e.value)
