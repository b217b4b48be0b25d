import json
print(json.dumps({"list": [], "dict": {}, "s": "ü", "t": [1, {"u": [2]}]}, indent="\t"))
print(json.dumps("ü"), json.dumps(3.0), json.dumps(1e100), json.dumps(0.1 + 0.2))
