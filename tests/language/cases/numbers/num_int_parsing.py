print(int("0x1f", 16), int("0x1f", 0), int("1_000"), int(" 42 "), int("-0b101", 0), int("z", 36), int("٣"))
for s in ["1.0", "0x", "1__0", ""]:
    try: int(s, 0) if s.startswith("0") else int(s)
    except ValueError as e: print(e)
print(float("1_000.5"), float(" -inf "), float("1e-3"), float.fromhex("0x1.8p1"), (0.5).hex(), (3.0).as_integer_ratio())
