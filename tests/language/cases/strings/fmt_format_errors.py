# restricted: refused (str.format)
for f in [lambda: "{}".format(), lambda: "{:d}".format("x"), lambda: f"{1.5:d}", lambda: "%d" % "x", lambda: "{0}{}".format(1, 2)]:
    try: f()
    except (ValueError, TypeError, IndexError) as e: print(type(e).__name__, e)
