import io
b = io.BytesIO()
t = io.TextIOWrapper(b, encoding="utf-8", newline="\n"); t.write("héllo\n"); t.flush()
print(b.getvalue(), len(b.getvalue())); b.seek(0); print(b.read(3), b.read())
print(io.BytesIO(b"a\nb").readlines())
