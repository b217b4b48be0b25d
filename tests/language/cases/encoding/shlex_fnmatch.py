# restricted: refused (module shlex is not importable)
import shlex, fnmatch
print(shlex.split("a 'b c' \"d e\" f\\ g"), shlex.quote("it's"), shlex.join(["a", "b c"]))
print(fnmatch.fnmatch("file.PY", "*.py"), fnmatch.fnmatchcase("file.PY", "*.py"), fnmatch.filter(["a.txt", "b.py", "c.txt"], "*.txt"), fnmatch.translate("*.t?t"))
