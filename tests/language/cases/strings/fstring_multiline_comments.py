# restricted: skip (host CPython 3.11 has no PEP 701 f-strings)
val = 10
print(f"{
    val  # a comment inside the braces
    * 2
}")
