# restricted: skip (uuid.NIL is new in 3.14)
import uuid
print(uuid.uuid5(uuid.NAMESPACE_DNS, "python.org"), uuid.uuid3(uuid.NAMESPACE_URL, "http://x"))
u = uuid.UUID("12345678-1234-5678-1234-567812345678")
print(u, repr(u), u.hex, u.int, u.version, u.variant, u.urn, u.bytes[:4], uuid.UUID(int=1), uuid.NIL)
try: uuid.UUID("xyz")
except ValueError as e: print(e)
