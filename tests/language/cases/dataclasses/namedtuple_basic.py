from collections import namedtuple
P = namedtuple("P", "x y", defaults=[0])
p = P(1)
print(p, p._asdict(), p._replace(y=5), P._fields, P._field_defaults)
x, y = p; print(x + y, p[0], p.x)
