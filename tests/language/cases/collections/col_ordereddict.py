# restricted: skip before 3.12 (the host's CPython before 3.12 prints differently from 3.14)
from collections import OrderedDict
o = OrderedDict.fromkeys("abcde")
o.move_to_end("b"); o.move_to_end("e", last=False); print(list(o))
print(o.popitem(), o.popitem(last=False), o)
print(OrderedDict(a=1, b=2) == OrderedDict(b=2, a=1), dict(a=1, b=2) == OrderedDict(b=2, a=1))
