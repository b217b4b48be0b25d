# restricted: refused (module traceback is not importable)
import traceback, sys
try:
    raise ExceptionGroup("many", [ValueError("v"), TypeError("t")])
except ExceptionGroup:
    traceback.print_exc(file=sys.stdout)
