import csv, io
out = io.StringIO()
w = csv.writer(out); w.writerow(["name", "note"]); w.writerow(["ann", 'says "hi", ok']); w.writerow(["bob", "multi\nline"]); w.writerow([1, None, 2.5])
print(repr(out.getvalue()))
print(list(csv.reader(io.StringIO(out.getvalue()))))
