# restricted: refused (module traceback is not importable)
import traceback, sys
a, b = 1, "x"
try:
    x = a + b
except TypeError:
    traceback.print_exc(file=sys.stdout)
