# restricted: refused (module traceback is not importable)
import traceback, sys
try:
    try:
        1 / 0
    except ZeroDivisionError:
        raise LookupError("clean") from None
except LookupError as e:
    traceback.print_exc(file=sys.stdout)
    print(e.__suppress_context__, type(e.__context__).__name__)
