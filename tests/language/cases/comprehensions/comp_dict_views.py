d = {"a": 1, "b": 2, "c": 3}
k = d.keys(); d["d"] = 4
print(k, d.values(), d.items(), k & {"a", "z"} == {"a"}, "a" in k, list(k - {"a"}) if False else len(k - {"a"}))
print(d.get("z"), d.setdefault("z", 9), d.pop("a"), d.popitem(), d, dict.fromkeys("xy", 0))
try:
    for key in d: d[key + "!"] = 1
except RuntimeError as e: print(e)
