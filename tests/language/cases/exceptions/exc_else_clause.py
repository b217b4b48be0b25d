for v in ["1", "x"]:
    try:
        n = int(v)
    except ValueError as e:
        print("error", e)
    else:
        print("ok", n)
    finally:
        print("end", v)
