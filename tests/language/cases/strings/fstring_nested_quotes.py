# restricted: skip before 3.12 (PEP 701 f-strings are new in 3.12)
names = ["a", "b"]
print(f"{", ".join(names)}")
print(f"{f"{f"{1 + 1}"}"}")
d = {"k": "v"}
print(f"{d["k"]}")
