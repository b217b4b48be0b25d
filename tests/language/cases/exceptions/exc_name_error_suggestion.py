# restricted: refused (module traceback is not importable)
import traceback, sys
def f():
    counter = 1
    return countr
try:
    f()
except NameError:
    traceback.print_exc(file=sys.stdout)
