print(sorted(["b", "B", "a", "A", "é", "e", "_", "1"]), "abc" < "abd", "Z" < "a", "" < "a")
print(max("hello"), min(["bb", "a", "ccc"], key=len))
