# restricted: refused (underscore name __supertype__)
from typing import cast, final, overload, Final, NewType, assert_never, reveal_type
UserId = NewType("UserId", int)
print(cast(int, "s"), UserId(5), UserId, UserId.__supertype__)
@final
class C: pass
print(C.__final__ if hasattr(C, "__final__") else None)
