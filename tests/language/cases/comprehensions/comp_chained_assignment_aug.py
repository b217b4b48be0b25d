# restricted: refused (augmented assignment to an item)
a = b = []
a += [1]; print(b)
t = (1,); u = t; t += (2,); print(t, u)
x = [0] * 3; x[0] += 5; print(x)
