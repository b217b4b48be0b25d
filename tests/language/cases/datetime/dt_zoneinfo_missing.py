# restricted: refused (module zoneinfo is not importable)
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
try: ZoneInfo("Mars/Olympus")
except ZoneInfoNotFoundError as e: print(type(e).__name__, e)
