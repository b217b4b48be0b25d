import difflib
a = "one\ntwo\nthree\nfour\n".splitlines(keepends=True)
b = "one\ntoo\nthree\nfour\nfive\n".splitlines(keepends=True)
print("".join(difflib.unified_diff(a, b, "a.txt", "b.txt")))
print("".join(difflib.ndiff(["abcd\n"], ["abxd\n"])))
print(difflib.SequenceMatcher(None, "abcd", "bcde").ratio(), difflib.get_close_matches("appel", ["ape", "apple", "peach"]))
print(difflib.SequenceMatcher(None, "qabxcd", "abycdf").get_opcodes())
