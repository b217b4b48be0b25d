# restricted: refused (module posixpath is not importable)
import posixpath as pp
print(pp.join("a", "b", "/c", "d"), pp.normpath("a//b/../c/./d"), pp.splitext("f.tar.gz"), pp.split("/a/b/"), pp.basename("/x/y.z"), pp.commonpath(["/a/b/c", "/a/b/d"]), pp.relpath("/a/b", "/a/c"))
