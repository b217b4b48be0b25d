# restricted: skip before 3.13 (the host's CPython before 3.13 prints differently from 3.14)
try:
    class X: pass
    class Y(X): pass
    class Z(X, Y): pass
except TypeError as e:
    print(type(e).__name__, e)
