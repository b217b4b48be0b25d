for s in ["Straße", "ΣΊΣΥΦΟΣ", "İstanbul", "ﬀ", "ǅ"]:
    print(s, s.lower(), s.upper(), s.casefold(), s.title(), len(s.upper()))
print("straße".casefold() == "STRASSE".casefold())
