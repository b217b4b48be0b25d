import unicodedata as u
s = "e\u0301"
for form in ["NFC", "NFD", "NFKC", "NFKD"]:
    n = u.normalize(form, s + "ﬁ²")
    print(form, [hex(ord(c)) for c in n], u.is_normalized(form, n))
