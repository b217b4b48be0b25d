# restricted: refused (underscore name __traceback__)
import sys
try: 1 / 0
except ZeroDivisionError as e:
    tb = e.__traceback__
    print(tb.tb_lineno, type(tb).__name__, sys.exc_info()[0].__name__)
print(sys.exc_info())
