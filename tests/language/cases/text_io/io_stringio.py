import io
buf = io.StringIO()
print("a", 1, sep="-", end="!\n", file=buf); buf.write("line2\n")
print(repr(buf.getvalue()), buf.tell()); buf.seek(0); print(buf.readline(), end=""); print(buf.read())
print(list(io.StringIO("x\ny\nz")), io.StringIO("abc").read(2))
