b = b"hello\x00\xff"
print(b, b.hex(), b.hex(":", 2), bytes.fromhex("de ad be ef"), list(b[:3]), b[0])
print(b"abc".upper(), bytearray(b"xy") + b"z", b"%d-%s" % (5, b"x"), b"a,b".split(b","))
print("héllo".encode(), "héllo".encode("latin-1"), b"h\xc3\xa9".decode(), "x".encode("utf-16"))
try: b"\xff".decode()
except UnicodeDecodeError as e: print(e)
print(b"\xff".decode("utf-8", "replace"), b"\xff".decode("utf-8", "backslashreplace"), "é".encode("ascii", "xmlcharrefreplace"))
