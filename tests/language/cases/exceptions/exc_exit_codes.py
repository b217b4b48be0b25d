# restricted: refused (underscore name __mro__)
import sys
try: sys.exit(3)
except SystemExit as e: print("exit", e.code)
try: raise KeyboardInterrupt
except BaseException as e: print(type(e).__mro__[1].__name__)
