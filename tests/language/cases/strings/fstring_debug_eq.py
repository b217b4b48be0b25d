x, name = 3, "Ann"
print(f"{x=}", f"{x * 2 = }", f"{name=!s}", f"{name = :>6}", f"{x=:03}")
