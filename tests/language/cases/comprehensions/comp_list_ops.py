xs = [5, 3, 8]
xs.append(1); xs.extend([2]); xs.insert(0, 9); xs.remove(3); print(xs, xs.pop(), xs.pop(0), xs)
print(xs.index(8), xs.count(5), xs * 2, xs + [0], xs[::-1], xs.copy() is xs)
xs[1:2] = ["a", "b", "c"]; print(xs); del xs[::2]; print(xs)
try: xs.remove("zz")
except ValueError as e: print(e)
