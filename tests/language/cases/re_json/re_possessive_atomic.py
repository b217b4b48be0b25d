import re
print(re.fullmatch(r"a*+a", "aaa"), re.fullmatch(r"(?>a*)b", "aab"), re.findall(r"\d++", "12 345"))
