from enum import IntFlag, Flag, auto
class Perm(IntFlag):
    R = 4
    W = 2
    X = 1
rw = Perm.R | Perm.W
print(rw, repr(rw), int(rw), Perm.R in rw, Perm.X in rw, list(rw))
class F(Flag):
    A = auto(); B = auto(); C = auto()
print(F.A | F.C, repr(F.A | F.B), ~F.A, F(0))
