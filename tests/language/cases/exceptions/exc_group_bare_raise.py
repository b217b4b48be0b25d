# restricted: refused (except* statement)
try:
    try:
        raise ExceptionGroup("eg", [ValueError(1), KeyError(2)])
    except* ValueError:
        print("handled values")
except ExceptionGroup as e:
    print("left:", repr(e))
