# restricted: refused (underscore name __qualname__)
class A: pass
print(type(A).__name__, A.__name__, A.__qualname__, A.__module__)
def f():
    class Inner: pass
    return Inner
print(f().__qualname__)
