# restricted: refused (ChainMap objects are read-only)
from collections import ChainMap
base = {"a": 1, "b": 2}; over = {"b": 20}
cm = ChainMap(over, base)
print(cm["a"], cm["b"], list(cm), dict(cm)); cm["c"] = 3; print(over, cm.parents, cm.new_child({"a": 0})["a"])
