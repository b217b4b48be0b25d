# restricted: refused (module zoneinfo is not importable)
from zoneinfo import ZoneInfo
from datetime import datetime, timedelta
ny = ZoneInfo("America/New_York")
d = datetime(2024, 3, 10, 1, 30, tzinfo=ny)
print(d, d.tzname(), (d + timedelta(hours=1)).tzname(), d.astimezone(ZoneInfo("UTC")))
amb = datetime(2024, 11, 3, 1, 30, tzinfo=ny)
print(amb.utcoffset(), amb.replace(fold=1).utcoffset())
print(datetime(2024, 7, 1, 12, tzinfo=ZoneInfo("Europe/Paris")).astimezone(ZoneInfo("Asia/Kolkata")), repr(ZoneInfo("Asia/Tokyo")))
