# restricted: refused (underscore name __notes__)
import traceback, sys
try:
    e = ValueError("bad value")
    e.add_note("while parsing row 3")
    e.add_note("column 'age'")
    raise e
except ValueError as err:
    print(err.__notes__)
    traceback.print_exc(file=sys.stdout)
