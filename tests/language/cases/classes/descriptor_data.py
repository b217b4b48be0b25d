# restricted: refused (underscore name __set_name__)
class Typed:
    def __set_name__(self, owner, name): self.name = "_" + name
    def __get__(self, obj, typ=None):
        if obj is None: return self
        return getattr(obj, self.name)
    def __set__(self, obj, value):
        if not isinstance(value, int): raise TypeError(f"{self.name[1:]} must be int")
        setattr(obj, self.name, value)
class P:
    x = Typed()
p = P(); p.x = 5; print(p.x, type(P.x).__name__)
try: p.x = "a"
except TypeError as e: print(e)
