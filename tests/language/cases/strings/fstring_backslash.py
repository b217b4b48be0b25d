# restricted: skip (host CPython 3.11 has no PEP 701 f-strings)
lines = ["a", "b"]
print(f"{'\n'.join(lines)}")
print(f"{'\t'!r}")
