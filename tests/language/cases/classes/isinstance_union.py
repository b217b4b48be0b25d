# restricted: skip (the host's CPython (3.11 to 3.13) prints differently from 3.14)
print(isinstance(3, int | str), isinstance(3.0, int | str), issubclass(bool, int))
print(int | None, type(int | str).__name__)
