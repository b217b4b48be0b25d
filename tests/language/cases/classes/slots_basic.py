# restricted: refused (underscore name __slots__)
class S:
    __slots__ = ("a", "b")
    def __init__(self): self.a = 1
s = S()
print(s.a)
try: s.c = 3
except AttributeError as e: print(e)
try: print(s.b)
except AttributeError as e: print(e)
print(hasattr(s, "__dict__"))
