import itertools as it
print(list(it.product("ab", repeat=2)), list(it.permutations([1, 2, 3], 2)))
print(list(it.combinations("abcd", 2)), list(it.combinations_with_replacement("ab", 2)))
print(len(list(it.permutations(range(6)))), list(it.product([1, 2], ["x"], [True])))
