import json
data = {"b": [1, 2.5, None, True], "a": {"nested": "é✓"}, "n": -0.0, "big": 10 ** 20}
s = json.dumps(data); print(s)
print(json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False))
print(json.loads(s) == data, json.dumps((1, 2)), json.dumps({1: "x", None: 2, True: 3}), json.dumps("\u2028\x00"))
