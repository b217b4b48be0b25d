# restricted: skip (the host's CPython (3.11 to 3.13) prints differently from 3.14)
from datetime import date, datetime, timedelta
print(date(2024, 3, 1) - date(2023, 3, 1), (datetime(2024, 1, 1, 12) - datetime(2024, 1, 1)).total_seconds())
print(timedelta(weeks=1) / timedelta(days=1), timedelta(days=7) // 3, timedelta(seconds=90) % timedelta(minutes=1), abs(timedelta(-3)))
print(max(date(2020, 1, 1), date(2019, 12, 31)), date(2024, 1, 1) < date(2024, 1, 2))
try: date(2023, 2, 29)
except ValueError as e: print(e)
try: datetime(2024, 1, 1) - date(2024, 1, 1)
except TypeError as e: print(e)
