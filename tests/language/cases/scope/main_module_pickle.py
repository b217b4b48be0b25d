# xfail: the program's module is not in sys.modules as __main__, so pickle cannot find classes and functions the program defines
# restricted: refused (module pickle is not importable)
import pickle, sys
def double(x): return 2 * x
print("__main__" in sys.modules, __name__)
print(pickle.loads(pickle.dumps(double))(21))
