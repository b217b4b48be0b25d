from enum import Enum, member, nonmember
class E(Enum):
    A = 1
    B = nonmember(2)
    @member
    def f(): return 3
print([m.name for m in E], E.B, callable(E.f.value))
