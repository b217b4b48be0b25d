class C:
    def m(self, a, b=1, *, c): pass
for call in [lambda: C().m(), lambda: C().m(1, 2, 3), lambda: C().m(1, d=2), lambda: C().m(1)]:
    try: call()
    except TypeError as e: print(e)
