# restricted: skip (host CPython 3.11 has no PEP 701 f-strings)
names = ["a", "b"]
print(f"{", ".join(names)}")
print(f"{f"{f"{1 + 1}"}"}")
d = {"k": "v"}
print(f"{d["k"]}")
