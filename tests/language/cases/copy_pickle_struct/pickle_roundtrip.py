# restricted: refused (module pickle is not importable)
import pickle
from collections import OrderedDict, Counter
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
objs = [1, 2 ** 100, 1.5, "é", b"\x00", (1, [2]), {3, 4}, frozenset([5]), None, True, OrderedDict(a=1), Counter("aab"), datetime(2024, 1, 2, 3), Decimal("1.1"), Fraction(1, 3), range(3), slice(1, 2), complex(1, 2)]
for proto in range(pickle.HIGHEST_PROTOCOL + 1):
    assert pickle.loads(pickle.dumps(objs, protocol=proto)) == objs
print(pickle.loads(pickle.dumps(objs)), pickle.HIGHEST_PROTOCOL, pickle.DEFAULT_PROTOCOL)
