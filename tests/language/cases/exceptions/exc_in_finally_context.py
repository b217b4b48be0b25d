try:
    try: raise ValueError("a")
    finally: raise TypeError("b")
except TypeError as e:
    print(repr(e), repr(e.__context__))
