# restricted: refused (underscore name __dict__)
class A:
    x = 1
a = A()
print(sorted(k for k in dir(a) if not k.startswith("__")), a.__dict__, A.__dict__["x"], type(A.__dict__).__name__)
setattr(a, "y", 2); print(getattr(a, "y"), hasattr(a, "z"), getattr(a, "z", "dflt")); delattr(a, "y"); print(vars(a))
print(object.__subclasshook__ is not None, issubclass(A, object), A.__bases__, A.__base__)
