from itertools import islice
def fib():
    a, b = 0, 1
    while True:
        yield a; a, b = b, a + b
print(list(islice(fib(), 15)))
print(next(x for x in fib() if x > 1000))
