# restricted: refused (underscore name __repr__)
import reprlib
print(reprlib.repr(list(range(100))), reprlib.repr("x" * 100), reprlib.repr({i: i for i in range(10)}))
class Node:
    @reprlib.recursive_repr()
    def __repr__(self): return f"Node({self.child!r})"
n = Node(); n.child = n; print(repr(n))
l = [1]; l.append(l); d = {}; d["self"] = d; print(l, d)
