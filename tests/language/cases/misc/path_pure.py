# restricted: refused (module pathlib is not importable)
from pathlib import PurePosixPath as P, PureWindowsPath as W
p = P("/usr/local/lib/python3.14/site.tar.gz")
print(p.name, p.stem, p.suffix, p.suffixes, p.parent, p.parts, p.anchor, list(p.parents)[:2])
print(P("a") / "b" / "../c", P("a/b").with_name("z.txt"), P("x.tar.gz").with_suffix(".zip"), P("/a/b").relative_to("/a"), P("/a").is_absolute())
print(W("C:\\Users\\x\\f.txt"), W("C:/a/b").parts, W("c:/A") == W("C:/a"), P("a/b").match("*/b"), P("a/b/c.py").full_match("a/**/*.py") if hasattr(P, "full_match") else None)
try: P("/a").relative_to("/b")
except ValueError as e: print(e)
