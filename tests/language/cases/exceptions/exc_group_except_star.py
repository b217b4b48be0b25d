# restricted: refused (except* statement)
try:
    raise ExceptionGroup("eg", [ValueError(1), TypeError(2), ValueError(3)])
except* ValueError as g:
    print("values", g.exceptions)
except* TypeError as g:
    print("types", g.exceptions)
