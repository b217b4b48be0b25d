# restricted: refused (module sqlite3 is not importable)
import sqlite3
con = sqlite3.connect(":memory:")
con.execute("create table t (id integer primary key, name text, score real)")
con.executemany("insert into t (name, score) values (?, ?)", [("a", 1.5), ("b", None), ("c", 3)])
print(con.execute("select * from t order by id").fetchall(), con.execute("select count(*), sum(score), avg(score) from t").fetchone())
con.row_factory = sqlite3.Row
r = con.execute("select name from t where score > ?", (2,)).fetchone(); print(r["name"], r.keys())
try: con.execute("select * from nope")
except sqlite3.OperationalError as e: print(e)
print(sqlite3.sqlite_version_info >= (3, 0, 0))
