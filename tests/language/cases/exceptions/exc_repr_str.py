e = KeyError("k"); print(str(e), repr(e))
e = OSError(22, "Invalid argument", "x.txt"); print(str(e), e.errno, e.strerror, e.filename)
print(repr(ValueError()), str(ValueError("a", 1)), repr(ExceptionGroup("g", [ValueError()])))
