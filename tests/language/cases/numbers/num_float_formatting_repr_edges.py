for x in [1.0, 1e100, 12345678901234567890.0, 0.000001, 0.0000001, 5e-324, 1/7]:
    print(str(x), f"{x}", f"{x:g}", f"{x:.17g}", format(x, "r") if False else "")
