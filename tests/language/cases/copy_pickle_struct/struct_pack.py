# restricted: skip before 3.12 (the host's CPython before 3.12 prints differently from 3.14)
import struct
print(struct.pack("<IhB", 1, -2, 255), struct.pack(">d", 1.5), struct.pack("!H4s", 80, b"abc"), struct.calcsize("<iq"), struct.calcsize("iq"))
print(struct.unpack("<IhB", b"\x01\x00\x00\x00\xfe\xff\xff"), struct.unpack_from(">H", b"\x00\x01\x02", 1), list(struct.iter_unpack("<h", b"\x01\x00\x02\x00")))
try: struct.pack("<B", 256)
except struct.error as e: print(e)
try: struct.unpack("<I", b"ab")
except struct.error as e: print(e)
print(struct.pack("<e", 1.5), struct.unpack("<f", struct.pack("<f", 0.1))[0], struct.pack("?", 5))
