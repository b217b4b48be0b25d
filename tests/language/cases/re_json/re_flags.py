import re
print(re.findall(r"^\w", "ab\ncd", re.M), re.findall(r"a.c", "a\nc", re.S), re.findall(r"ABC", "abc", re.I))
p = re.compile(r"""
    (\d{3})  # area
    \D*      # sep
    (\d{4})  # number
""", re.X)
print(p.search("call 555 -- 1234").groups(), re.compile("x", re.I | re.M).flags & re.I)
