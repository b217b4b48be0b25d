# restricted: refused (module traceback is not importable)
class Point:
    def __init__(self): self.x = 1; self.y = 2
try:
    Point().z
except AttributeError as e:
    print(e)
import traceback, sys
try:
    [].appendd(1)
except AttributeError:
    traceback.print_exc(file=sys.stdout)
