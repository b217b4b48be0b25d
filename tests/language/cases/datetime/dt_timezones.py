from datetime import datetime, timezone, timedelta
utc = timezone.utc
dt = datetime(2024, 6, 1, 12, tzinfo=utc)
tz = timezone(timedelta(hours=5, minutes=30), "IST")
print(dt, dt.astimezone(tz), tz, timezone(timedelta(hours=-3)), dt.timestamp(), datetime.fromtimestamp(0, utc))
print(dt.utcoffset(), dt.tzname(), datetime(2024, 1, 1).tzinfo, dt == dt.astimezone(tz))
try: dt < datetime(2024, 1, 1)
except TypeError as e: print(e)
