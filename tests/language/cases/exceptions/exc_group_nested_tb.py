# restricted: refused (module traceback is not importable)
import traceback, sys
try:
    raise ExceptionGroup("outer", [ValueError("x"), ExceptionGroup("inner", [KeyError("y")])])
except Exception:
    traceback.print_exc(file=sys.stdout)
