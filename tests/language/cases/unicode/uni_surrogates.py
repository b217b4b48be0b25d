s = "\ud800"
try: s.encode()
except UnicodeEncodeError as e: print(e)
print(s.encode("utf-8", "surrogatepass"), s.encode("utf-8", "surrogateescape") if False else "-")
print(b"\xed\xa0\x80".decode("utf-8", "surrogatepass") == s, repr(b"ab\xff".decode("utf-8", "surrogateescape")))
