# restricted: refused (underscore name __index__)
print((255).to_bytes(2, "big"), int.from_bytes(b"\x00\xff", "little"), (-1).to_bytes(2, "big", signed=True))
print((10).bit_length(), (6).bit_count(), (7).is_integer() if hasattr(int, "is_integer") else None, (3.0).is_integer())
print(True + True, int(True), 3 .real, (3).imag, (4).conjugate(), (12).__index__())
