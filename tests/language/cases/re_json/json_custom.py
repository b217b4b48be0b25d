import json
from datetime import date
class Enc(json.JSONEncoder):
    def default(self, o):
        if isinstance(o, date): return o.isoformat()
        return super().default(o)
print(json.dumps({"d": date(2024, 2, 29)}, cls=Enc), json.dumps([1, [2]], separators=(",", ":")))
print(json.loads('{"x": 1.10, "y": 2}', parse_float=str, object_hook=lambda d: sorted(d.items())))
print(json.loads("[NaN, Infinity, -Infinity]"), json.dumps([float("inf")]), json.loads('"\\ud83d\\ude00"'))
print(json.loads('{"a": 1, "a": 2}'), json.loads('{"a":1}', object_pairs_hook=list))
