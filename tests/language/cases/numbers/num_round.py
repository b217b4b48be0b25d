print([round(x) for x in [0.5, 1.5, 2.5, -0.5, -1.5]], round(2.675, 2), round(1234.5678, -2), round(5, -1), round(15, -1))
print(round(0.125, 2), round(0.375, 2), round(-2.5), type(round(2.5)), type(round(2.5, 0)))
