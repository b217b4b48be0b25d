# restricted: skip before 3.12 (the host's CPython before 3.12 prints differently from 3.14)
print(sum([0.1] * 10), sum([1e100, 1.0, -1e100]), sum(range(101)), sum([[1], [2]], []), sum([], start=5))
