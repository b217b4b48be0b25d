# restricted: skip (host CPython 3.11 prints differently from 3.14)
print(isinstance(3, int | str), isinstance(3.0, int | str), issubclass(bool, int))
print(int | None, type(int | str).__name__)
