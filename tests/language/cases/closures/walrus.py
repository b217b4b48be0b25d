data = [1, 5, 12, 3, 20]
if (n := len(data)) > 3: print("long", n)
print([y for x in data if (y := x * 2) > 10])
