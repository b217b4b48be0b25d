import re
for pat in ["(", "[a-", "a{2,1}", "(?P<1>x)", "*"]:
    try: re.compile(pat)
    except re.error as e: print(repr(pat), e.msg, e.pos)
