# restricted: refused (module traceback is not importable)
import traceback, sys
d = {"a": {"b": None}}
try:
    d["a"]["b"]["c"]
except TypeError:
    traceback.print_exc(file=sys.stdout)
