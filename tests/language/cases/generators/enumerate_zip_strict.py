print(list(enumerate("abc", start=1)))
print(list(zip([1, 2], "ab", strict=True)))
try: list(zip([1, 2, 3], "ab", strict=True))
except ValueError as e: print(e)
