# restricted: skip before 3.12 (itertools.batched is new in 3.12)
import itertools as it
print(list(it.pairwise("abcd")), list(it.batched(range(7), 3)), list(it.zip_longest("ab", [1, 2, 3], fillvalue="-")))
a, b = it.tee([1, 2, 3]); print(list(a), list(b), list(it.starmap(pow, [(2, 3), (3, 2)])))
