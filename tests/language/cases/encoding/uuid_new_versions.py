# restricted: skip (the host's CPython (3.11 to 3.13) prints differently from 3.14)
import uuid
print(uuid.uuid8(b"\x00" * 16 if False else 1, 2, 3) if hasattr(uuid, "uuid8") else None, uuid.MAX if hasattr(uuid, "MAX") else None)
