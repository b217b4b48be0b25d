# restricted: refused (module traceback is not importable)
import traceback, sys
try:
    try:
        {}["missing"]
    except KeyError:
        raise ValueError("converted")
except ValueError:
    traceback.print_exc(file=sys.stdout)
