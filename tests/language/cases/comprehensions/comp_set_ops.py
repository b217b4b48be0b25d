a, b = {1, 2, 3}, {3, 4}
print(a | b, a & b, a - b, a ^ b, a <= {1, 2, 3, 4}, a.isdisjoint({9}), frozenset([2, 1]))
print(sorted({"b", "a"}), set(), {()} , len({1, True, 1.0}))
