print(ord("€"), chr(0x1F600), "\N{GREEK SMALL LETTER ALPHA}", "\u00e9" == "é", "a" < "ä" < "b")
print(sorted("bäaz", key=str.casefold), max("€$£"))
