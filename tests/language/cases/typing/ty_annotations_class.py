# restricted: refused (underscore name __annotations__)
class C:
    a: int
    b: "str" = "x"
print(C.__annotations__, C.b, hasattr(C, "a"))
