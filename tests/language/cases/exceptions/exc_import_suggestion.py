# restricted: refused (module traceback is not importable)
import traceback, sys
try:
    math.sqrt(4)
except NameError as e:
    traceback.print_exc(file=sys.stdout)
