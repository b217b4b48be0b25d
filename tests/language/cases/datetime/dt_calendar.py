# restricted: skip before 3.12 (the host's CPython before 3.12 prints differently from 3.14)
import calendar
print(calendar.month(2024, 2))
print(calendar.isleap(2100), calendar.leapdays(2000, 2025), calendar.monthrange(2024, 2), calendar.weekday(2024, 1, 1), calendar.day_name[0], calendar.month_abbr[12])
print(calendar.TextCalendar(calendar.SUNDAY).formatmonth(2023, 10))
print(list(calendar.Calendar().itermonthdays(2024, 2))[:8], calendar.timegm((2024, 1, 1, 0, 0, 0)))
