# restricted: refused (underscore name __new__)
class Meta(type):
    def __new__(m, name, bases, ns):
        ns["tag"] = name.lower()
        return super().__new__(m, name, bases, ns)
    def __call__(cls, *a):
        print("creating", cls.__name__, a)
        return super().__call__(*a)
class Thing(metaclass=Meta):
    def __init__(self, x): self.x = x
t = Thing(3); print(t.tag, t.x, type(Thing).__name__)
