from graphlib import TopologicalSorter, CycleError
ts = TopologicalSorter({"d": {"b", "c"}, "b": {"a"}, "c": {"a"}})
order = list(ts.static_order()); print(order[0], order[-1], sorted(order[1:3]))
ts = TopologicalSorter({1: {2}, 2: {3}, 3: {1}})
try: ts.prepare()
except CycleError as e: print(e.args[0], sorted(e.args[1]))
