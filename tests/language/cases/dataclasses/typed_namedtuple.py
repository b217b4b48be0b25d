# restricted: refused (underscore name __annotations__)
from typing import NamedTuple
class Emp(NamedTuple):
    name: str
    dept: str = "eng"
    def badge(self): return f"{self.name}@{self.dept}"
e = Emp("ann")
print(e, e.badge(), Emp.__annotations__ if hasattr(Emp, "__annotations__") else None)
