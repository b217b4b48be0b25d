try: assert 1 == 2, "math broke"
except AssertionError as e: print(repr(e))
try: assert [] 
except AssertionError as e: print(repr(e))
