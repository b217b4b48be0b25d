# restricted: refused (underscore name _missing_)
from enum import Enum
class Status(Enum):
    OK = "ok"
    ERR = "err"
    @classmethod
    def _missing_(cls, v):
        if isinstance(v, str): return cls(v.lower())
print(Status("OK"), Status("Err"))
