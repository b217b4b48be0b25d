from collections import Counter
c = Counter("abracadabra")
print(c, c.most_common(2), c["z"], sorted(c.elements()), c.total())
d = Counter(a=1, b=5); print(c + d, c - d, c & d, c | d, +Counter(a=-1, b=2))
c.update("aaz"); c.subtract({"a": 10}); print(c)
