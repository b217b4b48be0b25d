words = ["banana", "Apple", "cherry", "apple", "Banana"]
print(sorted(words), sorted(words, key=str.lower), sorted(words, key=lambda w: (len(w), w)))
xs = [3, 1, 2]; print(xs.sort(), xs, sorted("hello", reverse=True))
from functools import cmp_to_key
print(sorted([3, 1, 2], key=cmp_to_key(lambda a, b: b - a)))
