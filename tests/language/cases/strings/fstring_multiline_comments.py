# restricted: skip before 3.12 (PEP 701 f-strings are new in 3.12)
val = 10
print(f"{
    val  # a comment inside the braces
    * 2
}")
