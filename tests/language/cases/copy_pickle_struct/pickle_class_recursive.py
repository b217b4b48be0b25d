# xfail: the program's module is not in sys.modules as __main__, so pickle cannot find classes the program defines
# restricted: refused (underscore name __reduce__)
import pickle
class P:
    def __init__(self, x): self.x = x
    def __eq__(self, o): return self.x == o.x
    def __reduce__(self): return (P, (self.x,))
l = [P(1)]; l.append(l)
r = pickle.loads(pickle.dumps(l)); print(r[0].x, r[1] is r)
try: pickle.dumps(lambda: 1)
except Exception as e: print(type(e).__name__)
