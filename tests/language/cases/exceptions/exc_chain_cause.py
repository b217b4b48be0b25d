# restricted: refused (module traceback is not importable)
import traceback, sys
try:
    try:
        int("x")
    except ValueError as e:
        raise RuntimeError("wrapped") from e
except RuntimeError:
    traceback.print_exc(file=sys.stdout)
