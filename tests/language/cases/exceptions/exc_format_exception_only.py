# restricted: refused (module traceback is not importable)
import traceback
try: int("nan!")
except ValueError as e:
    print(traceback.format_exception_only(e))
    print("".join(traceback.format_exception(e)).splitlines()[-1])
