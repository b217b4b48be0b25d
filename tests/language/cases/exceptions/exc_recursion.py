# restricted: refused (module sys is not importable)
import sys
def r(n): return r(n + 1)
try: r(0)
except RecursionError as e: print(e)
