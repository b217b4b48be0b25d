# restricted: refused (underscore name __missing__)
import string
class D(dict):
    def __missing__(self, k): return "<" + k + ">"
print("{a} {b}".format_map(D(a=1)))
print(string.Formatter().vformat("{0}-{x}", ("p",), {"x": "q"}))
print(list(string.Formatter().parse("a{b:>3}c{d!r}")))
