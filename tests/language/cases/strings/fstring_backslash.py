# restricted: skip before 3.12 (PEP 701 f-strings are new in 3.12)
lines = ["a", "b"]
print(f"{'\n'.join(lines)}")
print(f"{'\t'!r}")
