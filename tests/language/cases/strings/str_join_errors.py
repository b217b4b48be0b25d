# restricted: xfail (item assignment to a str says 'read-only in the sandbox' instead of CPython's TypeError text)
try: ",".join([1, 2])
except TypeError as e: print(e)
try: "a" + 1
except TypeError as e: print(e)
try: "abc"[5]
except IndexError as e: print(e)
try: "abc"[0] = "x"
except TypeError as e: print(e)
