def g():
    try:
        yield 1
    finally:
        print("finally ran")
it = g(); next(it); del it
print("end")
