# restricted: refused (underscore name __post_init__)
from dataclasses import dataclass, field, fields, asdict, astuple
@dataclass
class R:
    w: int
    h: int
    area: int = field(init=False)
    def __post_init__(self): self.area = self.w * self.h
r = R(2, 3)
print(r, [f.name for f in fields(r)], asdict(r), astuple(r))
