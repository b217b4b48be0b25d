s = "  Hello, World!  "
print(repr(s.strip()), s.lower(), s.upper(), s.title(), s.swapcase())
print("a,b,,c".split(","), "a b  c".split(), "a,b,c".rsplit(",", 1), "x".join("abc"))
print("hello".center(11, "*"), "42".zfill(5), "-42".zfill(5), "abc".ljust(5, "."), "tab\tbed".expandtabs(4))
print("prefix_name".removeprefix("prefix_"), "file.txt".removesuffix(".txt"), "aaa".replace("a", "b", 2))
print("Hello".startswith(("He", "x")), "hello".find("l"), "hello".rfind("l"), "hello".count("l"))
print("a\nb\r\nc".splitlines(), "a\nb\n".splitlines(keepends=True), "abc".partition("b"), "abc".rpartition("x"))
