from datetime import datetime, date
print(datetime.strptime("2024-07-04 15:30", "%Y-%m-%d %H:%M"), datetime.fromisoformat("2024-07-04T15:30:00+02:00"))
print(date.fromisoformat("20240704"), datetime.fromisoformat("2024-07-04T15:30Z"), date.fromisocalendar(2024, 1, 1))
print(f"{datetime(2024, 1, 5, 9, 3):%Y/%m/%d %I:%M %p %a %b}", format(date(2024, 1, 5), "%U %W %y"))
try: datetime.strptime("2024-13-01", "%Y-%m-%d")
except ValueError as e: print(e)
