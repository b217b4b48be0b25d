from datetime import date, datetime, timedelta, time
d = date(2024, 2, 28)
print(d + timedelta(days=1), d + timedelta(days=2), d.weekday(), d.isoweekday(), d.isocalendar(), d.toordinal(), d.strftime("%A %d %B %Y %j"))
dt = datetime(2024, 12, 31, 23, 59, 59, 999999)
print(dt, repr(dt), dt + timedelta(microseconds=1), dt.isoformat(timespec="milliseconds"), dt.replace(year=2023))
print(time(7, 5), time(7, 5, 3, 10).isoformat(), repr(timedelta(days=-1, seconds=5)), timedelta(hours=25, minutes=1), str(timedelta(days=-1, seconds=5)))
