# restricted: refused (module traceback is not importable)
import traceback, sys
try:
    compile("x = [1, 2\ny = 3\n", "<src>", "exec")
except SyntaxError:
    traceback.print_exc(file=sys.stdout)
