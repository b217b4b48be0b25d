from collections import defaultdict
dd = defaultdict(list)
for k, v in [("a", 1), ("b", 2), ("a", 3)]: dd[k].append(v)
print(dd, dict(dd), dd["missing"], len(dd))
tree = lambda: defaultdict(tree)
t = tree(); t["a"]["b"]["c"] = 1; print(dict(t["a"]["b"]), type(t["a"]).__name__)
