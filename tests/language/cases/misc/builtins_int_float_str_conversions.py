print(int(3.99), int(-3.99), float(3), str(3.0), str(1e-7), bool("False"), list("ab"), tuple({1: 2}), set("aab") == {"a", "b"})
print(int("  -7  "), float("  1e2 "), complex(" 1+2j "), str(b"x"), bytes(3), bytes([65, 66]), bytearray("é", "utf-8"))
