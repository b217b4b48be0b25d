for n in [3, 5, 7]:
    if n % 2 == 0: break
else:
    print("no even")
i = 0
while i < 3: i += 1
else: print("while done", i)
