d = {}
for k in ["z", "a", "m", "b"]: d[k] = len(d)
print(list(d), d)
d.pop("a"); d["a"] = 9; print(list(d))
print({1: 1, 2: 2} == {2: 2, 1: 1}, list({**{"b": 1}, "a": 2, "b": 3}), list(dict.fromkeys([3, 1, 3, 2])))
