import csv, io
data = "id;name\n1;ann\n2;bob\n"
rows = list(csv.DictReader(io.StringIO(data), delimiter=";")); print(rows)
out = io.StringIO(); w = csv.DictWriter(out, fieldnames=["id", "name"], quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
w.writeheader(); w.writerows([{"id": 1, "name": "x"}]); print(out.getvalue(), end="")
try: w.writerow({"zz": 1})
except ValueError as e: print(e)
