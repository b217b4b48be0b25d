from collections import deque
d = deque([1, 2, 3], maxlen=4)
d.append(4); d.append(5); print(d); d.appendleft(0); print(d)
d.rotate(1); print(d); d.rotate(-2); print(d, d[0], d[-1], d.maxlen)
d.extendleft("ab"); print(d, d.count("a"))
try: deque().pop()
except IndexError as e: print(e)
