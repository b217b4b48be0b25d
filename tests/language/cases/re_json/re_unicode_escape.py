import re
print(re.findall(r"\w+", "naïve café 中文"), re.findall(r"\w+", "naïve", re.A), re.escape("a.b*c?"), re.findall(r"\d", "1٣"))
print(re.sub(r"\s+", " ", "a \t\n b\u00a0c"), re.split(r"(\d)", "a1b2c"), re.split(r"x*", "axbc"))
