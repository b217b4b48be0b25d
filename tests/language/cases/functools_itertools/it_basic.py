import itertools as it
print(list(it.accumulate([1, 2, 3, 4])), list(it.accumulate([3, 1, 4], max)), list(it.accumulate([1, 2], initial=10)))
print(list(it.chain("ab", [1])), list(it.chain.from_iterable([[1], [2, 3]])), list(it.compress("abcd", [1, 0, 1, 0])))
print(list(it.islice(it.count(5, 2), 4)), list(it.islice(it.cycle("ab"), 5)), list(it.repeat("x", 3)))
print(list(it.dropwhile(lambda x: x < 3, [1, 4, 2])), list(it.takewhile(lambda x: x < 3, [1, 2, 4, 1])), list(it.filterfalse(None, [0, 1, 0, 2])))
