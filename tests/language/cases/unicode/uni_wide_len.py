s = "😀👍🏽中文🇫🇷"
print(len(s), [hex(ord(c)) for c in s], len(s.encode()), len(s.encode("utf-16-le")) // 2)
print(s[::-1] == "".join(reversed(s)), s[0], s.isprintable())
