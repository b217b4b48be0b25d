for a, b in [(7, 2), (-7, 2), (7, -2), (-7, -2)]:
    print(a // b, a % b, divmod(a, b), a / b)
print(-7.5 // 2, -7.5 % 2, 7 % -0.5, math_ok := True)
