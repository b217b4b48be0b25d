# restricted: xfail (pprint.pp sorts dict keys (CPython's pp keeps insertion order))
import pprint
data = {"name": "x" * 10, "items": list(range(30)), "nested": {"a": [{"b": i, "c": "y" * i} for i in range(4)]}, "t": (1, 2)}
pprint.pprint(data, width=60)
print(pprint.pformat(data, depth=1), pprint.pformat(set(range(5))))
pprint.pp({"z": 1, "a": 2})
