from enum import Enum
class C(Enum):
    A = 1
try: C(5)
except ValueError as e: print(e)
try: C["Z"]
except KeyError as e: print(repr(e))
try: C.A = 2
except AttributeError as e: print(e)
