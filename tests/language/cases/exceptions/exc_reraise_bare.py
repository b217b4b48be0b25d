# restricted: refused (module traceback is not importable)
import traceback, sys
def f():
    try: raise ValueError("inner")
    except ValueError: raise
try: f()
except ValueError: traceback.print_exc(file=sys.stdout)
