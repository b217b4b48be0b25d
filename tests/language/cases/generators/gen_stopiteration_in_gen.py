def bad():
    yield 1
    raise StopIteration
try:
    list(bad())
except RuntimeError as e:
    print(type(e).__name__, e, type(e.__cause__).__name__)
