# restricted: refused (module traceback is not importable)
import traceback, sys, math
try:
    math.sqr(4)
except AttributeError:
    traceback.print_exc(file=sys.stdout)
