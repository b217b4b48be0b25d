# restricted: refused (underscore name __match_args__)
class C:
    __match_args__ = ("a",)
    def __init__(self): self.a = 1
try:
    match C():
        case C(x, y): pass
except TypeError as e:
    print(e)
