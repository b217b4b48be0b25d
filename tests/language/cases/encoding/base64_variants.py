# restricted: skip before 3.13 (the host's CPython before 3.13 prints differently from 3.14)
import base64, binascii
b = b"\xfb\xff\x00hello?"
print(base64.b64encode(b), base64.urlsafe_b64encode(b), base64.b32encode(b), base64.b16encode(b), base64.b85encode(b), base64.a85encode(b))
print(base64.b64decode("aGk="), base64.b64decode("aGk", validate=False) if False else "", base64.standard_b64decode(b"YWJj"), base64.b32decode("NBUQ===="))
try: base64.b64decode("a")
except binascii.Error as e: print(e)
print(binascii.hexlify(b"ab", "-"), binascii.crc32(b"x"), base64.b32hexencode(b"x"), base64.z85encode(b"\x86\x4f\xd2\x6f\xb5\x59\xf7\x5b") if hasattr(base64, "z85encode") else None)
